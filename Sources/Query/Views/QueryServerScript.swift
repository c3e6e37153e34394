// The JavaScript of wikilog's query server (run by `node`), kept as a Swift string so that the
// binary needs no file beside it. Its source of truth is this file.

extension QueryServerCommand {
  /// wikilog's query server for JavaScript: CouchDB's query-server protocol under Node.js.
  static let script = #"""
    // wikilog's JavaScript query server: CouchDB's query-server protocol (one JSON command per
    // line on stdin, one JSON answer per line on stdout), run under Node.js. Design functions run
    // in a `vm` context of their own per design document, with CouchDB's helpers: emit, log, sum,
    // toJSON, isArray, require (CommonJS modules of the design document), getRow, send, start,
    // provides and registerType. Besides the documented commands it answers `map_docs`, several
    // documents at once (wikilog's own; another query server gets `map_doc` one at a time).
    'use strict';
    const fs = require('fs');
    const vm = require('vm');

    let input = Buffer.alloc(0);
    const chunk = Buffer.alloc(1 << 16);
    function readLine() {
      for (;;) {
        const nl = input.indexOf(10);
        if (nl >= 0) {
          const line = input.subarray(0, nl).toString('utf8');
          input = input.subarray(nl + 1);
          return line;
        }
        let n;
        try {
          n = fs.readSync(0, chunk, 0, chunk.length, null);
        } catch (e) {
          if (e.code === 'EAGAIN') continue;
          if (e.code === 'EOF') return null;
          throw e;
        }
        if (n === 0) return null;
        input = Buffer.concat([input, chunk.subarray(0, n)]);
      }
    }
    function write(value) {
      const text = JSON.stringify(value) + '\n';
      const bytes = Buffer.from(text, 'utf8');
      let off = 0;
      while (off < bytes.length) {
        try {
          off += fs.writeSync(1, bytes, off, bytes.length - off);
        } catch (e) {
          if (e.code !== 'EAGAIN') throw e;
        }
      }
    }
    function log(message) {
      write(['log', typeof message === 'string' ? message : toJSON(message)]);
    }
    function toJSON(value) {
      return JSON.stringify(value === undefined ? null : value);
    }
    function clean(value) {
      return value === undefined ? null : value;
    }
    function errorText(e) {
      if (e && typeof e === 'object' && e.message !== undefined) return String(e.message);
      if (typeof e === 'string') return e;
      try { return JSON.stringify(e); } catch (_) { return String(e); }
    }
    class Fatal {
      constructor(error, reason) { this.error = error; this.reason = reason; }
    }

    // A context per design document (and one for the map functions of `add_fun`): functions of
    // one never see another's globals.
    function makeContext(ddoc, lib) {
      const state = { emitted: null, listRows: null, chunks: [], startResp: null, gotRow: false,
        lastRow: false, providers: [], mimes: {} };
      const sandbox = {
        emit(key, value) {
          if (state.emitted === null) throw new Error('emit outside a map function');
          state.emitted.push([clean(key), clean(value)]);
        },
        log, toJSON,
        isArray: Array.isArray,
        sum(values) { let s = 0; for (const v of values) s += v; return s; },
        send(text) { state.chunks.push(String(text)); },
        start(resp) { state.startResp = resp || {}; },
        getRow() {
          if (state.lastRow) return null;
          if (!state.gotRow) {
            state.gotRow = true;
            write(['start', state.chunks.splice(0), state.startResp || {}]);
          } else {
            write(['chunks', state.chunks.splice(0)]);
          }
          const line = readLine();
          if (line === null) process.exit(0);
          const msg = JSON.parse(line);
          if (msg[0] === 'list_end') { state.lastRow = true; return null; }
          if (msg[0] !== 'list_row') throw new Fatal('list_error', 'not a row: ' + msg[0]);
          return msg[1];
        },
        provides(type, fun) { state.providers.push([type, fun]); },
        registerType(name, ...mimes) { state.mimes[name] = mimes; },
      };
      const ctx = vm.createContext(sandbox);
      const cache = {};
      function requireFrom(parentId, root) {
        return function (path) {
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
          if (cache[id]) return cache[id].exports;
          let source = root;
          for (const p of parts) {
            source = source && typeof source === 'object' ? source[p] : undefined;
          }
          if (typeof source !== 'string') {
            throw new Fatal('invalid_require_path', 'Object has no property "' + path + '". ' +
              toJSON(root));
          }
          const module = { id, exports: {}, current: source, parent: parentId };
          cache[id] = module;
          const wrapper = vm.runInContext(
            '(function (module, exports, require) {' + source + '\n})', ctx, { filename: id });
          wrapper(module, module.exports, requireFrom(id, root));
          return module.exports;
        };
      }
      if (ddoc) sandbox.require = requireFrom(null, ddoc);
      else if (lib) sandbox.require = requireFrom(null, { views: { lib } });
      else sandbox.require = () => { throw new Error('require needs a design document lib'); };
      const parse = vm.runInContext('JSON.parse', ctx);
      function compile(source, name) {
        let fun;
        try {
          fun = vm.runInContext('(' + source + ')', ctx, { filename: name || 'design function' });
        } catch (e) {
          throw new Fatal('compilation_error', 'Expression does not eval to a function. (' +
            source + ') ' + errorText(e));
        }
        if (typeof fun !== 'function') {
          throw new Fatal('compilation_error', 'Expression does not eval to a function. (' +
            source + ')');
        }
        return fun;
      }
      // Values of the main realm (JSON parsed here) made native to the context.
      function adopt(value) { return value === undefined ? undefined : parse(JSON.stringify(value)); }
      return { ctx, state, compile, parse, adopt };
    }

    function seal(value) {
      if (value && typeof value === 'object') {
        Object.freeze(value);
        for (const k of Object.keys(value)) seal(value[k]);
      }
      return value;
    }

    let mapContext = makeContext(null, null);
    let mapFuns = [];
    let config = {};
    const ddocs = {};

    function mapOne(doc) {
      const out = [];
      const state = mapContext.state;
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
      const ctx = mapContext;
      return sources.map((source) => {
        const fun = ctx.compile(source, 'reduce');
        return clean(fun(ctx.adopt(keys), ctx.adopt(values), rereduce));
      });
    }

    function ddocFunction(ddoc, path) {
      // A view as a filter names the view; its function is the map.
      if (path[0] === 'views' && path.length === 2) path = path.concat(['map']);
      let node = ddoc.doc;
      for (const p of path) {
        node = node && typeof node === 'object' ? node[p] : undefined;
      }
      if (typeof node !== 'string') {
        throw new Fatal('not_found', 'missing ' + path.join(' ') + ' function in ' + ddoc.doc._id);
      }
      const key = path.join('\u0000');
      if (!ddoc.funs[key]) ddoc.funs[key] = ddoc.ctx.compile(node, path.join('.'));
      return ddoc.funs[key];
    }

    function runShowLike(c, fun, args) {
      const state = c.state;
      state.chunks = [];
      state.providers = [];
      let resp = fun(...args);
      if (resp === undefined && state.providers.length > 0) {
        const req = args[1] || {};
        const accept = (req.headers && req.headers.Accept) || '';
        const format = req.query && req.query.format;
        let chosen = state.providers[0];
        for (const p of state.providers) {
          if (p[0] === format || (accept && accept.indexOf(mimeOf(p[0])) >= 0)) { chosen = p; break; }
        }
        resp = chosen[1]();
        if (typeof resp === 'string') resp = { body: resp, headers: { 'Content-Type': mimeOf(chosen[0]) } };
      }
      if (typeof resp === 'string') resp = { body: resp };
      if (resp === undefined || resp === null) resp = {};
      if (state.chunks.length) resp.body = state.chunks.join('') + (resp.body || '');
      return resp;
    }
    function mimeOf(name) {
      return ({ html: 'text/html; charset=utf-8', json: 'application/json', text: 'text/plain; charset=utf-8',
        xml: 'application/xml', js: 'text/javascript', css: 'text/css' })[name] || name;
    }

    function ddocCommand(args) {
      const id = args[0];
      if (id === 'new') {
        const doc = args[2];
        const c = makeContext(doc, null);
        ddocs[args[1]] = { doc, ctx: c, funs: {} };
        return true;
      }
      const ddoc = ddocs[id];
      if (!ddoc) throw new Fatal('query_protocol_error', 'uncached design doc: ' + id);
      const path = args[1];
      const fargs = args[2] || [];
      const c = ddoc.ctx;
      const kind = path[0];
      const fun = ddocFunction(ddoc, path);
      switch (kind) {
        case 'validate_doc_update':
          try {
            fun(c.adopt(fargs[0]), c.adopt(fargs[1]), c.adopt(fargs[2]), c.adopt(fargs[3]));
            return 1;
          } catch (e) {
            if (e && typeof e === 'object' && (e.forbidden !== undefined || e.unauthorized !== undefined)) {
              return e.forbidden !== undefined ? { forbidden: e.forbidden } : { unauthorized: e.unauthorized };
            }
            throw e;
          }
        case 'filters': {
          const docs = fargs[0] || [];
          const req = c.adopt(fargs[1]);
          return [true, docs.map((d) => { try { return !!fun(c.adopt(d), req); } catch (e) { return false; } })];
        }
        case 'views': {
          const docs = fargs[0] || [];
          const state = c.state;
          return [true, docs.map((d) => {
            state.emitted = [];
            try { fun(c.adopt(d)); } catch (e) { state.emitted = []; }
            const any = state.emitted.length > 0;
            state.emitted = null;
            return any;
          })];
        }
        case 'shows': {
          const resp = runShowLike(c, fun, [c.adopt(fargs[0]), c.adopt(fargs[1])]);
          return ['resp', resp];
        }
        case 'updates': {
          const doc = c.adopt(fargs[0]);
          const result = fun(doc, c.adopt(fargs[1]));
          let [newDoc, resp] = Array.isArray(result) ? result : [null, result];
          if (typeof resp === 'string') resp = { body: resp };
          return ['up', clean(newDoc), resp || {}];
        }
        case 'lists': {
          const state = c.state;
          state.chunks = []; state.startResp = null; state.gotRow = false; state.lastRow = false;
          state.providers = [];
          let tail = fun(c.adopt(fargs[0]), c.adopt(fargs[1]));
          if (tail === undefined && state.providers.length > 0) tail = state.providers[0][1]();
          if (!state.gotRow) write(['start', state.chunks.splice(0), state.startResp || {}]);
          if (!state.lastRow) {
            // Drain the rows the function did not ask for.
            for (;;) {
              const line = readLine();
              if (line === null) process.exit(0);
              if (JSON.parse(line)[0] === 'list_end') break;
              write(['chunks', []]);
            }
          }
          if (tail !== undefined && tail !== null) state.chunks.push(String(tail));
          return ['end', state.chunks.splice(0)];
        }
        default:
          throw new Fatal('unknown_command', 'unknown ddoc command ' + kind);
      }
    }

    function handle(cmd) {
      switch (cmd[0]) {
        case 'reset':
          config = cmd[1] || {};
          mapContext = makeContext(null, null);
          mapFuns = [];
          return true;
        case 'add_lib':
          mapContext = makeContext(null, cmd[1]);
          mapFuns = [];
          return true;
        case 'add_fun':
          mapFuns.push(mapContext.compile(cmd[1], 'map'));
          return true;
        case 'map_doc':
          return mapOne(seal(mapContext.adopt(cmd[1])));
        case 'map_docs':
          return cmd[1].map((d) => mapOne(seal(mapContext.adopt(d))));
        case 'reduce': {
          const kvs = cmd[2];
          return [true, reduceValues(cmd[1], kvs.map((kv) => kv[0]), kvs.map((kv) => kv[1]), false)];
        }
        case 'rereduce':
          return [true, reduceValues(cmd[1], null, cmd[2], true)];
        case 'ddoc':
          return ddocCommand(cmd.slice(1));
        default:
          throw new Fatal('unknown_command', 'unknown command ' + cmd[0]);
      }
    }

    for (;;) {
      const line = readLine();
      if (line === null) break;
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (e) {
        write(['error', 'query_protocol_error', 'invalid JSON: ' + errorText(e)]);
        continue;
      }
      try {
        write(handle(cmd));
      } catch (e) {
        if (e instanceof Fatal) write(['error', e.error, e.reason]);
        else write(['error', 'function_raised_error', errorText(e)]);
      }
    }
    """#
}
