// OutputPump: poll() over the ranks' pipes, line splitting, log files, tails.
#include "launcher/output_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/internal/output_file.h"

namespace zdp::launcher {

// The console going away (EPIPE) is not an error: the log still has everything.
void write_all(int fd, const std::string& text) { (void)write_fully(fd, text); }

OutputPump::OutputPump(Terminal& console, std::string log_dir, size_t tail_lines)
    : console_(console), log_dir_(std::move(log_dir)), tail_lines_(tail_lines) {}

OutputPump::~OutputPump() {
  for (auto& [rank, src] : sources_) {
    if (src.log_fd >= 0) ::close(src.log_fd);
  }
}

std::string OutputPump::log_path(int rank) const { return log_dir_ + "/rank-" + std::to_string(rank) + ".log"; }

Status OutputPump::add(int rank, int fd, const std::string& header) {
  Source& src = sources_[rank];
  // The pipe is read whatever happens to the log: a rank whose output nobody reads blocks
  // on a full pipe (64 KiB) and would hang the job.
  src.fd = fd;
  src.partial.clear();
  src.tail.clear();
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
  if (src.log_fd < 0 && !src.log_failed) {
    src.log_fd = ec ? -1 : ::open(log_path(rank).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (src.log_fd < 0) {
      src.log_failed = true;
      const std::string why = ec ? "cannot create log_dir '" + log_dir_ + "': " + ec.message()
                                 : "cannot open " + log_path(rank) + ": " + std::strerror(errno);
      return Status(StatusCode::kIoError, why + "; rank " + std::to_string(rank) + "'s output goes to this console only");
    }
  }
  if (!header.empty()) write_log(rank, src, header + "\n");
  return Status::Ok();
}

// A log that cannot be written (a full disk) is said once, with the reason, on the console,
// which keeps the rank's lines; the log is not cut silently.
void OutputPump::write_log(int rank, Source& src, const std::string& text) {
  if (src.log_failed) return;
  const int err = write_fully(src.log_fd, text);
  if (err == 0) return;
  src.log_failed = true;
  console_.line("dp-launch: cannot write " + log_path(rank) + ": " + std::strerror(err) + "; rank " +
                std::to_string(rank) + "'s log ends here, its output from here on is on this console only");
}

void OutputPump::emit_lines(int rank, Source& src, const std::vector<std::string_view>& lines) {
  if (lines.empty()) return;
  // One write to the log and one to the console for a whole read's lines: a rank printing
  // short lines fast cost two system calls a line, and the launcher fell behind it.
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string log_text, console_text;
  for (const std::string_view line : lines) {
    log_text.append(line).push_back('\n');
    if (!console_text.empty()) console_text.push_back('\n');
    console_text.append(prefix).append(line);
  }
  write_log(rank, src, log_text);
  console_.line(console_text);
  const size_t first_kept = lines.size() > tail_lines_ ? lines.size() - tail_lines_ : 0;
  for (size_t i = first_kept; i < lines.size(); ++i) src.tail.emplace_back(lines[i]);
  while (src.tail.size() > tail_lines_) src.tail.pop_front();
}

void OutputPump::read_from(int rank, Source& src) {
  char buf[65536];
  // At most this much per call: a rank that prints faster than the console takes it keeps
  // its pipe full, and reading until it is empty never gave the supervisor its loop back
  // (Ctrl-C, other ranks' exits and the deadlines went unseen).
  for (size_t taken = 0; taken < kMaxReadPerPump;) {
    const ssize_t n = ::read(src.fd, buf, sizeof(buf));
    if (n > 0) {
      taken += static_cast<size_t>(n);
      size_t scan = src.partial.size();  // what came before holds no newline
      src.partial.append(buf, static_cast<size_t>(n));
      const std::string_view text(src.partial);
      std::vector<std::string_view> lines;
      size_t start = 0;
      for (size_t nl; (nl = text.find('\n', scan)) != std::string_view::npos; start = scan = nl + 1) {
        lines.push_back(text.substr(start, nl - start));
      }
      // Output without newlines (a progress bar drawn with \r, binary data) is passed on
      // in pieces of kMaxLine bytes, so the launcher's memory stays bounded.
      for (; text.size() - start >= kMaxLine; start += kMaxLine) lines.push_back(text.substr(start, kMaxLine));
      emit_lines(rank, src, lines);
      src.partial.erase(0, start);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file (or a broken pipe): flush an unterminated last line.
    if (!src.partial.empty()) emit_lines(rank, src, {std::string_view(src.partial)});
    src.partial.clear();
    // Not closed here: the fd belongs to the RankProcess, which closes it. Closing it
    // here too made the RankProcess close a number the store server had since reused for
    // an accepted socket, hanging up on a rank of the next attempt (seen in
    // MultiHost.ARestartResumesAcrossBothHosts).
    src.fd = -1;
    return;
  }
}

void OutputPump::pump(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (auto& [rank, src] : sources_) {
    if (src.fd < 0) continue;
    fds.push_back(pollfd{src.fd, POLLIN, 0});
    ranks.push_back(rank);
  }
  if (fds.empty()) {
    ::poll(nullptr, 0, static_cast<int>(timeout.count()));
    return;
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) read_from(ranks[i], sources_[ranks[i]]);
  }
}

bool OutputPump::drained() const {
  for (const auto& [rank, src] : sources_) {
    if (src.fd >= 0) return false;
  }
  return true;
}

std::vector<std::string> OutputPump::tail(int rank) const {
  auto it = sources_.find(rank);
  if (it == sources_.end()) return {};
  std::vector<std::string> out(it->second.tail.begin(), it->second.tail.end());
  if (!it->second.partial.empty()) out.push_back(it->second.partial);
  return out;
}

}  // namespace zdp::launcher
