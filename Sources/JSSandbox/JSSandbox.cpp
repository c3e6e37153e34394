// wikilog's JavaScript query server on SpiderMonkey (Debian's libmozjs-102, the engine
// CouchDB's couchjs is built on): CouchDB's query-server protocol on standard input and
// output, run as `wikilog query-server`.
//
// What a design function can reach is what the ECMAScript standard library and CouchDB's
// helpers give it, nothing more:
// - SpiderMonkey without a browser or a shell has no bindings to the operating system: no
//   files, processes, sockets, environment, timers or modules. Nothing of the host is defined
//   in a sandbox's global; the two host functions (write a line, read a line) are handed to the
//   prelude's closure (Prelude.h) and are reachable from no design function.
// - Every design document gets a global (a realm) of its own, in a compartment and zone of its
//   own, and so does each view build (`reset`): a function that changes a builtin's prototype
//   changes it for its own design document only.
// - WebAssembly is off; memory is bounded by the GC heap's limit and by RLIMIT_DATA; the host
//   (QueryServerProcess) kills a command that runs past its time.
// - Behind the engine, the process itself is walled: file descriptors beyond 0-2 closed, no
//   environment, no new privileges, and a seccomp filter that refuses executing programs,
//   opening files, sockets and signals to other processes — for the case of a flaw in the
//   engine itself.
//
// This is one of the files where unsafe pointer code lives (docs/architecture.md lists them).

// The engine was built without its debug assertions; SwiftPM's debug builds define DEBUG,
// which would change what its headers declare.
#undef DEBUG

#include "JSSandbox.h"

#include <jsapi.h>
#include <jsfriendapi.h>
#include <js/CallAndConstruct.h>
#include <js/CharacterEncoding.h>
#include <js/CompilationAndEvaluation.h>
#include <js/Context.h>
#include <js/ContextOptions.h>
#include <js/Conversions.h>
#include <js/Exception.h>
#include <js/GCAPI.h>
#include <js/GlobalObject.h>
#include <js/Initialization.h>
#include <js/Realm.h>
#include <js/RealmOptions.h>
#include <js/SourceText.h>
#include <js/Stack.h>
#include <js/String.h>
#include <mozilla/Utf8.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "Prelude.h"

namespace {

// ---- Lines in and out ----------------------------------------------------------------------

std::string inputBuffer;
size_t inputStart = 0;

/// The next line of standard input (without its newline); false at its end.
bool readLine(std::string &line) {
  for (;;) {
    const char *begin = inputBuffer.data() + inputStart;
    const void *newline = memchr(begin, '\n', inputBuffer.size() - inputStart);
    if (newline != nullptr) {
      size_t length = static_cast<const char *>(newline) - begin;
      line.assign(begin, length);
      inputStart += length + 1;
      if (inputStart > (1 << 20) && inputStart * 2 > inputBuffer.size()) {
        inputBuffer.erase(0, inputStart);
        inputStart = 0;
      }
      return true;
    }
    char chunk[1 << 16];
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    inputBuffer.append(chunk, static_cast<size_t>(n));
  }
}

void writeAll(const char *bytes, size_t count) {
  while (count > 0) {
    ssize_t n = write(1, bytes, count);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      _exit(0);  // Nobody reads our answers any more.
    }
    bytes += n;
    count -= static_cast<size_t>(n);
  }
}

void writeLine(const char *bytes, size_t count) {
  // One write for the line and its newline where it is small, so that a reader never sees half.
  if (count < 4096) {
    char line[4097];
    memcpy(line, bytes, count);
    line[count] = '\n';
    writeAll(line, count + 1);
  } else {
    writeAll(bytes, count);
    writeAll("\n", 1);
  }
}

void writeError(const char *error, const std::string &reason) {
  std::string line = "[\"error\",\"";
  line += error;
  line += "\",\"";
  for (unsigned char c : reason) {
    if (c == '"' || c == '\\') {
      line += '\\';
      line += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof escaped, "\\u%04x", c);
      line += escaped;
    } else {
      line += static_cast<char>(c);
    }
  }
  line += "\"]";
  writeLine(line.data(), line.size());
}

// ---- The first strings of a command ----------------------------------------------------------

/// Reads a JSON string at `text[i]` (after white space) into `out`, decoding its escapes.
bool jsonString(const std::string &text, size_t &i, std::string &out) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) i++;
  if (i >= text.size() || text[i] != '"') return false;
  i++;
  out.clear();
  while (i < text.size()) {
    char c = text[i++];
    if (c == '"') return true;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i >= text.size()) return false;
    char e = text[i++];
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto hex = [&](uint32_t &value) {
          if (i + 4 > text.size()) return false;
          value = 0;
          for (int k = 0; k < 4; k++) {
            char h = text[i++];
            value <<= 4;
            if (h >= '0' && h <= '9') value |= h - '0';
            else if (h >= 'a' && h <= 'f') value |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') value |= h - 'A' + 10;
            else return false;
          }
          return true;
        };
        uint32_t code;
        if (!hex(code)) return false;
        if (code >= 0xD800 && code < 0xDC00 && i + 1 < text.size() && text[i] == '\\' &&
            text[i + 1] == 'u') {
          i += 2;
          uint32_t low;
          if (!hex(low)) return false;
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | (code >> 6));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
          out += static_cast<char>(0xE0 | (code >> 12));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xF0 | (code >> 18));
          out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default: return false;
    }
  }
  return false;
}

/// The command's name and, for `ddoc`, the design document's key (`["ddoc", KEY, …]` or
/// `["ddoc", "new", KEY, …]`): what decides the realm it runs in.
struct Head {
  std::string command;
  bool isNew = false;
  std::string key;
};

bool parseHead(const std::string &line, Head &head) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') i++;
  if (i >= line.size() || line[i] != '[') return false;
  i++;
  if (!jsonString(line, i, head.command)) return false;
  if (head.command != "ddoc" && head.command != "reset") return true;
  auto comma = [&]() {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i >= line.size() || line[i] != ',') return false;
    i++;
    return true;
  };
  if (head.command == "reset") {
    // `["reset", {}, KEY]`: wikilog's own form, the realm kept under KEY (one design
    // document's views in one database); CouchDB's `["reset", CONFIG]` gets a new realm.
    if (!comma()) return true;
    while (i < line.size() && line[i] == ' ') i++;
    if (i + 1 >= line.size() || line[i] != '{' || line[i + 1] != '}') return true;
    i += 2;
    if (!comma() || !jsonString(line, i, head.key)) head.key.clear();
    return true;
  }
  if (!comma() || !jsonString(line, i, head.key)) return false;
  if (head.key == "new") {
    head.isNew = true;
    if (!comma() || !jsonString(line, i, head.key)) return false;
  }
  return true;
}

// ---- The engine ------------------------------------------------------------------------------

const JSClass globalClass = {"global", JSCLASS_GLOBAL_FLAGS, &JS::DefaultGlobalClassOps};


/// `hostWrite(text)`: one line out (a log line, a list's chunks).
bool hostWrite(JSContext *cx, unsigned argc, JS::Value *vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  JS::RootedString text(cx, JS::ToString(cx, args.get(0)));
  if (!text) return false;
  JS::UniqueChars bytes = JS_EncodeStringToUTF8(cx, text);
  if (!bytes) return false;
  writeLine(bytes.get(), strlen(bytes.get()));
  args.rval().setUndefined();
  return true;
}

/// `hostRead()`: the next line in (a list's next row), or null at the end of input.
bool hostRead(JSContext *cx, unsigned argc, JS::Value *vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  std::string line;
  if (!readLine(line)) {
    args.rval().setNull();
    return true;
  }
  JSString *text = JS_NewStringCopyUTF8N(cx, JS::UTF8Chars(line.data(), line.size()));
  if (!text) return false;
  args.rval().setString(text);
  return true;
}

/// A realm of its own: its global and the prelude's dispatch function.
struct Sandbox {
  JS::PersistentRootedObject global;
  JS::PersistentRootedValue dispatch;
  explicit Sandbox(JSContext *cx) : global(cx), dispatch(cx) {}
};

std::string pendingErrorText(JSContext *cx) {
  JS::RootedValue exception(cx);
  if (!JS_GetPendingException(cx, &exception)) return "an uncatchable error";
  JS_ClearPendingException(cx);
  JS::RootedString text(cx, JS::ToString(cx, exception));
  if (!text) {
    JS_ClearPendingException(cx);
    return "an error that cannot be shown";
  }
  JS::UniqueChars bytes = JS_EncodeStringToUTF8(cx, text);
  if (!bytes) {
    JS_ClearPendingException(cx);
    return "an error that cannot be shown";
  }
  return bytes.get();
}

std::unique_ptr<Sandbox> makeSandbox(JSContext *cx) {
  auto sandbox = std::make_unique<Sandbox>(cx);
  JS::RealmOptions options;
  options.creationOptions().setNewCompartmentAndZone();
  sandbox->global = JS_NewGlobalObject(cx, &globalClass, nullptr, JS::FireOnNewGlobalHook,
                                       options);
  if (!sandbox->global) return nullptr;
  JSAutoRealm realm(cx, sandbox->global);
  if (!JS::InitRealmStandardClasses(cx)) return nullptr;
  JS::CompileOptions compile(cx);
  compile.setFileAndLine("wikilog-query-server.js", 1);
  JS::SourceText<mozilla::Utf8Unit> source;
  if (!source.init(cx, kPrelude, strlen(kPrelude), JS::SourceOwnership::Borrowed)) {
    return nullptr;
  }
  JS::RootedValue prelude(cx);
  if (!JS::Evaluate(cx, compile, source, &prelude)) return nullptr;
  JSFunction *writeFunction = JS_NewFunction(cx, hostWrite, 1, 0, "hostWrite");
  JSFunction *readFunction = JS_NewFunction(cx, hostRead, 0, 0, "hostRead");
  if (!writeFunction || !readFunction) return nullptr;
  JS::RootedValueArray<2> hostFunctions(cx);
  hostFunctions[0].setObject(*JS_GetFunctionObject(writeFunction));
  hostFunctions[1].setObject(*JS_GetFunctionObject(readFunction));
  if (!JS::Call(cx, JS::UndefinedHandleValue, prelude, hostFunctions, &sandbox->dispatch)) {
    return nullptr;
  }
  return sandbox;
}

/// Runs one command line in `sandbox` and writes its answer.
void run(JSContext *cx, Sandbox &sandbox, const std::string &line) {
  JSAutoRealm realm(cx, sandbox.global);
  JS::RootedValueArray<1> arguments(cx);
  JSString *text = JS_NewStringCopyUTF8N(cx, JS::UTF8Chars(line.data(), line.size()));
  if (!text) {
    writeError("os_process_error", "the command could not be read: " + pendingErrorText(cx));
    return;
  }
  arguments[0].setString(text);
  JS::RootedValue answer(cx);
  if (!JS::Call(cx, JS::UndefinedHandleValue, sandbox.dispatch, arguments, &answer)) {
    if (!JS_IsExceptionPending(cx)) {
      // Uncatchable: the engine gave up on the script (out of memory). The process ends and is
      // started again for the next command.
      writeError("os_process_error", "the query server ran out of memory");
      _exit(1);
    }
    writeError("function_raised_error", pendingErrorText(cx));
    return;
  }
  // Promise jobs a function queued run now, not during a later command.
  js::RunJobs(cx);
  if (!answer.isString()) {
    writeError("os_process_error", "the query server's dispatch did not answer");
    return;
  }
  JS::RootedString answerText(cx, answer.toString());
  JS::UniqueChars bytes = JS_EncodeStringToUTF8(cx, answerText);
  if (!bytes) {
    writeError("function_raised_error", pendingErrorText(cx));
    return;
  }
  writeLine(bytes.get(), strlen(bytes.get()));
}

// ---- The walls around the process ------------------------------------------------------------

/// Closes every descriptor the process inherited beyond standard input, output and error.
void closeInherited() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  long most = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (most > 0 ? most : 1024); fd++) close(static_cast<int>(fd));
}

/// Refuses, with EPERM, the system calls that reach outside the process: running programs,
/// opening files, sockets, signals to others, tracing; clone only makes threads.
void installSeccomp() {
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
#if defined(__x86_64__) || defined(__aarch64__)
  static const int refused[] = {
#ifdef __NR_open
      __NR_open,
#endif
#ifdef __NR_creat
      __NR_creat,
#endif
#ifdef __NR_fork
      __NR_fork,
#endif
#ifdef __NR_vfork
      __NR_vfork,
#endif
#ifdef __NR_unlink
      __NR_unlink,
#endif
#ifdef __NR_rename
      __NR_rename,
#endif
#ifdef __NR_mkdir
      __NR_mkdir,
#endif
#ifdef __NR_rmdir
      __NR_rmdir,
#endif
#ifdef __NR_link
      __NR_link,
#endif
#ifdef __NR_symlink
      __NR_symlink,
#endif
#ifdef __NR_chmod
      __NR_chmod,
#endif
#ifdef __NR_chown
      __NR_chown,
#endif
#ifdef __NR_openat2
      __NR_openat2,
#endif
      __NR_openat, __NR_execve, __NR_execveat, __NR_socket, __NR_socketpair, __NR_connect,
      __NR_bind, __NR_listen, __NR_accept, __NR_accept4, __NR_sendto, __NR_sendmsg,
      __NR_recvfrom, __NR_recvmsg, __NR_kill, __NR_tkill, __NR_ptrace, __NR_process_vm_readv,
      __NR_process_vm_writev, __NR_unlinkat, __NR_renameat, __NR_mkdirat, __NR_linkat,
      __NR_symlinkat, __NR_fchmodat, __NR_fchownat, __NR_truncate, __NR_mount, __NR_umount2,
      __NR_chroot, __NR_pivot_root, __NR_setuid, __NR_setgid, __NR_setns, __NR_unshare,
      __NR_bpf, __NR_perf_event_open, __NR_io_uring_setup, __NR_keyctl, __NR_add_key,
      __NR_request_key, __NR_init_module, __NR_finit_module, __NR_delete_module, __NR_kexec_load,
      __NR_reboot, __NR_name_to_handle_at, __NR_open_by_handle_at, __NR_memfd_create,
      __NR_userfaultfd, __NR_pidfd_open, __NR_pidfd_getfd, __NR_clone3,
  };
  const size_t count = sizeof refused / sizeof refused[0];
#if defined(__x86_64__)
  const uint32_t arch = AUDIT_ARCH_X86_64;
#else
  const uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
  std::vector<sock_filter> filter;
  auto add = [&](sock_filter f) { filter.push_back(f); };
  add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0));
  add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  // x32 system calls (another numbering) are refused as a whole.
  add(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
#endif
  for (size_t k = 0; k < count; k++) {
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(refused[k]), 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K,
                 refused[k] == __NR_clone3 ? (SECCOMP_RET_ERRNO | ENOSYS)
                                           : (SECCOMP_RET_ERRNO | EPERM)));
  }
  // clone: threads only (CLONE_THREAD set), never a new process.
  add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3));
  add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  add(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0));
  add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
  add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog program = {static_cast<unsigned short>(filter.size()), filter.data()};
  prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
#endif
}

}  // namespace

extern "C" int wikilog_js_query_server(int memoryMiB, int walls) {
  closeInherited();
  clearenv();
  if (memoryMiB <= 0) memoryMiB = 512;
  if (memoryMiB > 4000) memoryMiB = 4000;
  const size_t heapBytes = static_cast<size_t>(memoryMiB) << 20;
  if (walls) {
    // Room for the engine's own code and tables beside the heap.
    struct rlimit data = {heapBytes * 2 + (512u << 20), heapBytes * 2 + (512u << 20)};
    setrlimit(RLIMIT_DATA, &data);
    // No core files. (Not RLIMIT_NPROC: for a user other than root it counts threads too,
    // and the engine's helper threads would not start; seccomp refuses new processes.)
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
  }
  if (!JS_Init()) {
    writeError("os_process_error", "the JavaScript engine did not start");
    return 1;
  }
  JSContext *cx = JS_NewContext(static_cast<uint32_t>(heapBytes));
  if (!cx) {
    writeError("os_process_error", "the JavaScript engine did not start");
    return 1;
  }
  JS_SetGCParameter(cx, JSGC_MAX_BYTES, static_cast<uint32_t>(heapBytes));
  JS_SetNativeStackQuota(cx, 4u << 20);
  JS::ContextOptionsRef(cx).setWasm(false);
  if (!js::UseInternalJobQueues(cx) || !JS::InitSelfHostedCode(cx)) {
    writeError("os_process_error", "the JavaScript engine did not start");
    return 1;
  }
  // A first realm before the walls go up: whatever the engine sets up lazily is set up now.
  std::unique_ptr<Sandbox> fresh = makeSandbox(cx);
  if (!fresh) {
    writeError("os_process_error", "the JavaScript engine did not start");
    return 1;
  }
  Sandbox *mapSandbox = fresh.get();
  if (walls) installSeccomp();

  // Realms kept by key, most recently used first: design documents' (`ddoc new`) and views'
  // (`reset` with a key); the oldest beyond `keptRealms` is dropped (the host loads a design
  // document again when it meets "uncached design doc").
  const size_t keptRealms = 64;
  std::list<std::pair<std::string, std::unique_ptr<Sandbox>>> designDocuments;
  std::unordered_map<std::string, decltype(designDocuments)::iterator> byKey;
  auto keep = [&](const std::string &key, std::unique_ptr<Sandbox> sandbox) -> Sandbox * {
    auto found = byKey.find(key);
    if (found != byKey.end()) {
      if (found->second->second.get() == mapSandbox) mapSandbox = nullptr;
      designDocuments.erase(found->second);
      byKey.erase(found);
    }
    designDocuments.emplace_front(key, std::move(sandbox));
    byKey[key] = designDocuments.begin();
    if (designDocuments.size() > keptRealms) {
      if (designDocuments.back().second.get() == mapSandbox) mapSandbox = nullptr;
      byKey.erase(designDocuments.back().first);
      designDocuments.pop_back();
    }
    return designDocuments.front().second.get();
  };
  auto kept = [&](const std::string &key) -> Sandbox * {
    auto found = byKey.find(key);
    if (found == byKey.end()) return nullptr;
    designDocuments.splice(designDocuments.begin(), designDocuments, found->second);
    return found->second->second.get();
  };

  std::string line;
  while (readLine(line)) {
    Head head;
    if (!parseHead(line, head)) {
      // Not a command: a realm answers it (with CouchDB's protocol error).
      run(cx, mapSandbox ? *mapSandbox : *fresh, line);
      continue;
    }
    if (head.command == "ddoc") {
      const std::string key = "ddoc\x1f" + head.key;
      if (head.isNew) {
        std::unique_ptr<Sandbox> sandbox = makeSandbox(cx);
        if (!sandbox) {
          writeError("os_process_error", "a sandbox could not be made: " + pendingErrorText(cx));
          continue;
        }
        run(cx, *keep(key, std::move(sandbox)), line);
        continue;
      }
      Sandbox *sandbox = kept(key);
      if (!sandbox) {
        writeError("query_protocol_error", "uncached design doc: " + head.key);
        continue;
      }
      run(cx, *sandbox, line);
      continue;
    }
    if (head.command == "reset") {
      // A view build, or a reduce of a query, in the realm of its design document and
      // database (wikilog's key), or in a new realm.
      const std::string key = "views\x1f" + head.key;
      Sandbox *sandbox = head.key.empty() ? nullptr : kept(key);
      if (!sandbox) {
        std::unique_ptr<Sandbox> made = makeSandbox(cx);
        if (!made) {
          writeError("os_process_error", "a sandbox could not be made: " + pendingErrorText(cx));
          continue;
        }
        if (head.key.empty()) {
          fresh = std::move(made);
          sandbox = fresh.get();
        } else {
          sandbox = keep(key, std::move(made));
        }
      }
      mapSandbox = sandbox;
    }
    if (!mapSandbox) {
      // Its realm was let go since its `reset`: answering from a new one, which knows none of
      // its functions, would be wrong.
      writeError("query_protocol_error", "no functions: send reset and add_fun again");
      continue;
    }
    run(cx, *mapSandbox, line);
  }
  _exit(0);
}
