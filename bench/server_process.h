// The real oobleck-planner binary as a child process, for the programs in bench/ that
// measure the service from outside (replan_loadgen, cache_budget_bench, soak): start it on
// 127.0.0.1:0, read the address it prints, read its memory from /proc, see whether it is
// still alive, and stop it with SIGTERM.
#ifndef OOBLECK_BENCH_SERVER_PROCESS_H_
#define OOBLECK_BENCH_SERVER_PROCESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace oobleck::bench {

// `flag` if set, else the oobleck-planner next to the running program (both are built into
// the same bin/ directory).
inline std::string ServerBinary(const std::string& flag) {
  if (!flag.empty()) return flag;
  return (std::filesystem::canonical("/proc/self/exe").parent_path() / "oobleck-planner").string();
}

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { Stop(); }

  // Spawns `binary args...` and waits for its "listening on HOST:PORT" line. The server's
  // stderr goes to `stderr_path` when set (it logs one line per call), else to ours.
  // On failure `error()` says why.
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             const std::string& stderr_path = "") {
    int out[2];
    if (pipe(out) != 0) return Failed("pipe() failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    if (!stderr_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    std::vector<std::string> all = {binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc != 0) {
      close(out[0]);
      pid_ = -1;
      return Failed(absl::StrCat("cannot run ", binary));
    }
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    std::smatch match;
    if (!std::regex_search(line, match, std::regex(R"(listening on (\S+:\d+))"))) {
      return Failed(absl::StrCat(binary, " did not print \"listening on HOST:PORT\" (",
                                 Alive() ? "still running" : exit_description_, ")"));
    }
    address_ = match[1];
    return true;
  }

  // SIGTERM (the server drains in-flight calls) and wait for the exit.
  void Stop() {
    if (pid_ <= 0 || !Alive()) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    Reaped(status);
  }

  // False once the process has exited; exit_description() then says how.
  bool Alive() {
    if (pid_ <= 0 || exited_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) Reaped(status);
    return !exited_;
  }

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  const std::string& error() const { return error_; }
  const std::string& exit_description() const { return exit_description_; }

 private:
  bool Failed(std::string message) {
    error_ = std::move(message);
    return false;
  }
  void Reaped(int status) {
    exited_ = true;
    exit_description_ = WIFSIGNALED(status)
                            ? absl::StrCat("killed by signal ", WTERMSIG(status))
                            : absl::StrCat("exited with status ", WEXITSTATUS(status));
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  std::string address_, error_, exit_description_;
};

// A field of /proc/<pid>/status in KiB ("VmRSS": resident now, "VmHWM": peak resident);
// -1 if the process or the field is gone.
inline int64_t ProcStatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kib = -1;
    value >> kib;
    return kib;
  }
  return -1;
}

// Nearest-rank percentile (p in [0, 1]) of `values`; 0 when empty.
inline double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * (values.size() - 1) + 0.5));
  return values[i];
}

// GET http://127.0.0.1:<port>/metrics; empty on failure.
inline std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, n);
    }
  }
  close(fd);
  return text;
}

}  // namespace oobleck::bench

#endif  // OOBLECK_BENCH_SERVER_PROCESS_H_
