// clang-format off
// The JavaScript that JSSandbox.cpp evaluates in every sandbox (see the comment below).
static const char kPrelude[] = R"JS(
// wikilog's JavaScript query server, the part that runs inside the sandbox: CouchDB's
// query-server protocol for one realm (the map/reduce realm, or one design document's).
//
// Kept as a C++ raw string so that the binary needs no file beside it. The host (JSSandbox.cpp) evaluates it in a fresh global that has nothing but
// the ECMAScript standard library, calls it with two host functions (write a line, read a
// line), which stay in this closure and never reach a design function, and gets back the
// function it calls with each command line. Every value a design function sees is made in its
// own realm; nothing of the host is reachable from here.
(function (hostWrite, hostRead) {
  'use strict';
  const global = globalThis;
  // Taken before any design function runs: a function that replaces these changes only its
  // own realm's globals, not what the protocol uses.
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const isArray = Array.isArray;
  const freeze = Object.freeze;
  const objectKeys = Object.keys;
  const StringOf = String;
  const indirectEval = eval;
  const hasOwn = Object.prototype.hasOwnProperty;
  const apply = Reflect.apply;

  function write(value) {
    hostWrite(stringify(value));
  }
  function readLine() {
    const line = hostRead();
    if (line === null) throw new Fatal('query_protocol_error', 'end of input');
    return line;
  }
  function toJSON(value) {
    return stringify(value === undefined ? null : value);
  }
  function log(message) {
    write(['log', typeof message === 'string' ? message : toJSON(message)]);
  }
  function clean(value) {
    return value === undefined ? null : value;
  }
  function errorText(e) {
    try {
      // An Error as couchjs's errstr shows it: its name, then its message.
      if (e instanceof Error) return StringOf(e.name) + ': ' + StringOf(e.message);
      if (e && typeof e === 'object' && e.message !== undefined) return StringOf(e.message);
      if (typeof e === 'string') return e;
      return stringify(e);
    } catch (_) {
      return 'an error that cannot be shown';
    }
  }
  function Fatal(error, reason) {
    this.error = error;
    this.reason = reason;
  }

  const state = {
    emitted: null, chunks: [], startResp: null, gotRow: false, lastRow: false, inList: false,
    providers: [], mimes: {},
  };

  // CouchDB's helpers, the only globals a design function gets beyond the standard library.
  global.emit = function emit(key, value) {
    if (state.emitted === null) throw new Error('emit outside a map function');
    state.emitted.push([clean(key), clean(value)]);
  };
  global.log = log;
  global.toJSON = toJSON;
  global.isArray = isArray;
  global.sum = function sum(values) {
    let s = 0;
    for (let i = 0; i < values.length; i++) s += values[i];
    return s;
  };
  global.send = function send(text) {
    state.chunks.push(StringOf(text));
  };
  global.start = function start(resp) {
    state.startResp = resp || {};
  };
  global.getRow = function getRow() {
    // Only a list function reads rows: anywhere else the next line is another command (of
    // another design document, maybe another database's), which no function may read.
    if (!state.inList) throw new Error('getRow outside a list function');
    if (state.lastRow) return null;
    if (!state.gotRow) {
      state.gotRow = true;
      write(['start', state.chunks.splice(0), state.startResp || {}]);
    } else {
      write(['chunks', state.chunks.splice(0)]);
    }
    const msg = parse(readLine());
    if (msg[0] === 'list_end') {
      state.lastRow = true;
      return null;
    }
    if (msg[0] !== 'list_row') throw new Fatal('list_error', 'not a row: ' + msg[0]);
    return msg[1];
  };
  global.provides = function provides(type, fun) {
    state.providers.push([type, fun]);
  };
  global.registerType = function registerType(name, ...mimes) {
    state.mimes[name] = mimes;
  };
  global.require = function require() {
    throw new Error('require needs a design document lib');
  };

  // CommonJS modules of the design document (or of the views' `lib`), compiled in this realm.
  const moduleCache = {};
  function requireFrom(parentId, root) {
    return function require(path) {
      if (typeof path !== 'string') throw new Error('require needs a path');
      const parts = path.startsWith('.') && parentId ? parentId.split('/').slice(0, -1) : [];
      for (const p of path.split('/')) {
        if (p === '' || p === '.') continue;
        if (p === '..') {
          if (parts.length === 0) throw new Error('invalid require path: ' + path);
          parts.pop();
        } else parts.push(p);
      }
      const id = parts.join('/');
      if (hasOwn.call(moduleCache, id)) return moduleCache[id].exports;
      let source = root;
      for (const p of parts) {
        source = source && typeof source === 'object' && hasOwn.call(source, p) ? source[p] : undefined;
      }
      if (typeof source !== 'string') {
        throw new Fatal('invalid_require_path',
          'Object has no property "' + path + '". ' + toJSON(root));
      }
      const module = { id, exports: {}, current: source, parent: parentId };
      moduleCache[id] = module;
      const wrapper = indirectEval('(function (module, exports, require) {' + source + '\n})');
      wrapper(module, module.exports, requireFrom(id, root));
      return module.exports;
    };
  }

  // A design function's source as CouchDB takes it: an expression that is a function, also
  // when written as a statement with a trailing semicolon (`function (doc) {…};`).
  function compile(source) {
    if (typeof source !== 'string') {
      throw new Fatal('compilation_error', 'Expression does not eval to a function. (' +
        toJSON(source) + ')');
    }
    let fun;
    let failure;
    try {
      fun = indirectEval('(' + source + '\n)');
    } catch (e) {
      failure = e;
      const trimmed = source.replace(/[\s;]+$/, '');
      if (trimmed !== source) {
        try {
          fun = indirectEval('(' + trimmed + '\n)');
          failure = undefined;
        } catch (_) {}
      }
    }
    if (failure !== undefined) {
      throw new Fatal('compilation_error', 'Expression does not eval to a function. (' +
        source + ') ' + errorText(failure));
    }
    if (typeof fun !== 'function') {
      throw new Fatal('compilation_error', 'Expression does not eval to a function. (' +
        source + ')');
    }
    return fun;
  }

  function seal(value) {
    if (value && typeof value === 'object') {
      freeze(value);
      for (const k of objectKeys(value)) seal(value[k]);
    }
    return value;
  }

  // The map/reduce realm's state.
  let mapFuns = [];
  // The design document's, when this realm holds one.
  let ddoc = null;
  const ddocFuns = {};

  function mapOne(doc) {
    const out = [];
    for (const fun of mapFuns) {
      state.emitted = [];
      try {
        fun(doc);
        out.push(state.emitted);
      } catch (e) {
        if (e instanceof Fatal) throw e;
        // As CouchDB: the document is skipped for this function, and the error logged.
        log('function raised exception (' + errorText(e) + ') with doc._id ' +
          (doc && doc._id));
        out.push([]);
      }
      state.emitted = null;
    }
    return out;
  }

  function reduceValues(sources, keys, values, rereduce) {
    return sources.map((source) => clean(compile(source)(keys, values, rereduce)));
  }

  function ddocFunction(path) {
    // A view as a filter names the view; its function is the map.
    if (path[0] === 'views' && path.length === 2) path = path.concat(['map']);
    let node = ddoc;
    for (const p of path) {
      node = node && typeof node === 'object' && hasOwn.call(node, p) ? node[p] : undefined;
    }
    if (typeof node !== 'string') {
      throw new Fatal('not_found', 'missing ' + path.join(' ') + ' function in ' + ddoc._id);
    }
    const key = path.join('\u0000');
    if (!hasOwn.call(ddocFuns, key)) ddocFuns[key] = compile(node);
    return ddocFuns[key];
  }

  // The types `provides` knows by name (CouchDB's defaults), and those `registerType` adds.
  const defaultMimes = {
    all: ['*/*'], text: ['text/plain; charset=utf-8', 'txt'],
    html: ['text/html; charset=utf-8'], xhtml: ['application/xhtml+xml', 'xhtml'],
    xml: ['application/xml', 'text/xml', 'application/x-xml'],
    js: ['text/javascript', 'application/javascript', 'application/x-javascript'],
    css: ['text/css'], ics: ['text/calendar'], csv: ['text/csv'],
    rss: ['application/rss+xml'], atom: ['application/atom+xml'],
    yaml: ['application/x-yaml', 'text/yaml'], multipart_form: ['multipart/form-data'],
    url_encoded_form: ['application/x-www-form-urlencoded'],
    json: ['application/json', 'text/x-json'],
  };

  function mimesOf(name) {
    if (hasOwn.call(state.mimes, name)) return state.mimes[name];
    if (hasOwn.call(defaultMimes, name)) return defaultMimes[name];
    return [name];
  }

  function mimeOf(name) { return mimesOf(name)[0]; }

  // How well media type `mime` meets the `Accept` ranges (0 for not at all): the quality of the
  // most specific range that matches, as mimeparse's `quality` does.
  function quality(mime, ranges) {
    const [type, sub] = mime.split(';')[0].trim().toLowerCase().split('/');
    let best = -1;
    let q = 0;
    for (const r of ranges) {
      if ((r.type === type || r.type === '*') && (r.sub === sub || r.sub === '*')) {
        const fit = (r.type === type ? 10 : 0) + (r.sub === sub ? 1 : 0);
        if (fit > best) {
          best = fit;
          q = r.q;
        }
      }
    }
    return q;
  }

  // The provider a request asks for: `?format=` by name, else the best match of `Accept`
  // (all of it when absent); none is CouchDB's 406 `not_acceptable`.
  function chooseProvider(req) {
    const format = req.query && req.query.format;
    if (format !== undefined) {
      for (const p of state.providers) if (p[0] === format) return p;
    } else {
      const header = (req.headers && (req.headers.Accept || req.headers.accept)) || '*/*';
      const ranges = String(header).split(',').map((part) => {
        const pieces = part.split(';');
        const [type, sub] = pieces[0].trim().toLowerCase().split('/');
        let q = 1;
        for (const param of pieces.slice(1)) {
          const [k, v] = param.split('=');
          if (k && k.trim() === 'q') q = parseFloat(v);
        }
        return { type: type || '', sub: sub || '*', q: isNaN(q) ? 0 : q };
      });
      let chosen = null;
      let best = 0;
      for (const p of state.providers) {
        for (const mime of mimesOf(p[0])) {
          const q = quality(mime, ranges);
          if (q > best) {
            best = q;
            chosen = p;
          }
        }
      }
      if (chosen) return chosen;
    }
    const offered = [];
    for (const p of state.providers) for (const m of mimesOf(p[0])) offered.push(m);
    throw new Fatal('not_acceptable', 'Content-Type(s) ' +
      (format !== undefined ? format : String((req.headers && req.headers.Accept) || '*/*')) +
      ' not supported, try one of: ' + offered.join(', '));
  }

  function runShowLike(fun, args) {
    state.chunks = [];
    state.providers = [];
    let resp = apply(fun, ddoc, args);
    if (resp === undefined && state.providers.length > 0) {
      const chosen = chooseProvider(args[1] || {});
      resp = chosen[1]();
      if (typeof resp === 'string') {
        resp = { body: resp, headers: { 'Content-Type': mimeOf(chosen[0]) } };
      }
    }
    if (typeof resp === 'string') resp = { body: resp };
    if (resp === undefined || resp === null) resp = {};
    if (state.chunks.length) resp.body = state.chunks.join('') + (resp.body || '');
    return resp;
  }

  function ddocCommand(args) {
    if (args[0] === 'new') {
      ddoc = args[2];
      global.require = requireFrom(null, ddoc);
      return true;
    }
    if (ddoc === null) throw new Fatal('query_protocol_error', 'uncached design doc: ' + args[0]);
    const path = args[1];
    const fargs = args[2] || [];
    const kind = path[0];
    const fun = ddocFunction(path);
    switch (kind) {
      case 'validate_doc_update':
        try {
          apply(fun, ddoc, [fargs[0], fargs[1], fargs[2], fargs[3]]);
          return 1;
        } catch (e) {
          if (e && typeof e === 'object' &&
            (e.forbidden !== undefined || e.unauthorized !== undefined)) {
            return e.forbidden !== undefined ? { forbidden: e.forbidden }
              : { unauthorized: e.unauthorized };
          }
          throw e;
        }
      case 'filters': {
        const docs = fargs[0] || [];
        const req = fargs[1];
        return [true, docs.map((d) => {
          try {
            return !!apply(fun, ddoc, [d, req]);
          } catch (e) {
            if (e instanceof Fatal) throw e;
            return false;
          }
        })];
      }
      case 'views': {
        const docs = fargs[0] || [];
        return [true, docs.map((d) => {
          state.emitted = [];
          try {
            fun(d);
          } catch (e) {
            if (e instanceof Fatal) throw e;
            state.emitted = [];
          }
          const any = state.emitted.length > 0;
          state.emitted = null;
          return any;
        })];
      }
      case 'shows':
        return ['resp', runShowLike(fun, [fargs[0], fargs[1]])];
      case 'updates': {
        const result = apply(fun, ddoc, [fargs[0], fargs[1]]);
        let newDoc = null;
        let resp = result;
        if (isArray(result)) {
          newDoc = result[0];
          resp = result[1];
        }
        if (typeof resp === 'string') resp = { body: resp };
        return ['up', clean(newDoc), resp || {}];
      }
      case 'rewrites': {
        // As couchjs's runRewrite: nothing is no rule, a string a path.
        const result = apply(fun, ddoc, [fargs[0]]);
        if (!result) return ['no_dispatch_rule'];
        if (typeof result === 'string') return ['ok', { path: result, method: fargs[0].method }];
        return ['ok', result];
      }
      case 'lists': {
        state.chunks = [];
        state.startResp = null;
        state.gotRow = false;
        state.lastRow = false;
        state.providers = [];
        state.inList = true;
        let tail;
        try {
          tail = apply(fun, ddoc, [fargs[0], fargs[1]]);
          if (tail === undefined && state.providers.length > 0) {
            const chosen = chooseProvider(fargs[1] || {});
            const type = mimeOf(chosen[0]);
            if (!state.gotRow) {
              state.startResp = state.startResp || {};
              state.startResp.headers = state.startResp.headers || {};
              if (!state.startResp.headers['Content-Type']) {
                state.startResp.headers['Content-Type'] = type;
              }
            }
            tail = chosen[1]();
          }
        } finally {
          state.inList = false;
        }
        if (!state.gotRow) {
          // The function asked for no row: its start now, then the host's first row (or the
          // end of the rows) is answered with the end, as couchjs's runList does.
          write(['start', state.chunks.splice(0), state.startResp || {}]);
          state.gotRow = true;
          if (!state.lastRow) parse(readLine());
        }
        // Else the host waits for the answer to the last row the function read: the end. It
        // sends no more rows once it has it.
        if (tail !== undefined && tail !== null) state.chunks.push(StringOf(tail));
        return ['end', state.chunks.splice(0)];
      }
      default:
        throw new Fatal('unknown_command', 'unknown ddoc command ' + kind);
    }
  }

  function handle(cmd) {
    switch (cmd[0]) {
      case 'reset':
        mapFuns = [];
        return true;
      case 'add_lib':
        global.require = requireFrom(null, { views: { lib: cmd[1] } });
        mapFuns = [];
        return true;
      case 'add_fun':
        mapFuns.push(compile(cmd[1]));
        return true;
      case 'map_doc':
        return mapOne(seal(cmd[1]));
      case 'map_docs': {
        const docs = cmd[1];
        const out = new Array(docs.length);
        for (let i = 0; i < docs.length; i++) out[i] = mapOne(seal(docs[i]));
        return out;
      }
      case 'reduce': {
        const kvs = cmd[2];
        const keys = kvs.map((kv) => kv[0]);
        const values = kvs.map((kv) => kv[1]);
        return [true, reduceValues(cmd[1], keys, values, false)];
      }
      case 'rereduce':
        return [true, reduceValues(cmd[1], null, cmd[2], true)];
      case 'ddoc':
        return ddocCommand(cmd.slice(1));
      default:
        throw new Fatal('unknown_command', 'unknown command ' + cmd[0]);
    }
  }

  // One command line in, one answer line out (as a string, written by the host).
  return function dispatch(line) {
    let cmd;
    try {
      cmd = parse(line);
    } catch (e) {
      return stringify(['error', 'query_protocol_error', 'invalid JSON: ' + errorText(e)]);
    }
    try {
      return stringify(handle(cmd));
    } catch (e) {
      if (e instanceof Fatal) return stringify(['error', e.error, e.reason]);
      return stringify(['error', 'function_raised_error', errorText(e)]);
    }
  };
})
)JS";
