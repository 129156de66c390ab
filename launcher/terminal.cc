// Terminal (terminal.h).
#include "launcher/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "launcher/output_pump.h"

namespace zdp::launcher {
namespace {

constexpr const char* kEraseLine = "\r\033[K";

}  // namespace

// What the console thread writes, in order; `bytes` is what the queue holds.
struct Terminal::Queue {
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::string> pending;
  size_t bytes = 0;
  size_t dropped = 0;        // lines dropped so far
  size_t dropped_told = 0;   // of which the console was told
  bool writing = false;      // the thread holds an item it is writing
  bool closing = false;
};

Terminal::Terminal(int fd, bool live) : fd_(fd), live_(live), queue_(std::make_shared<Queue>()) {
  // Detached: one blocked on a console nobody reads must not hold the launcher's exit. It
  // owns the queue with this object, so it may outlive it.
  std::thread([fd, q = queue_] {
    std::unique_lock<std::mutex> lock(q->mu);
    for (;;) {
      q->changed.wait(lock, [&] { return !q->pending.empty() || q->closing; });
      if (q->pending.empty()) return;  // closing, and all written
      std::string next = std::move(q->pending.front());
      q->pending.pop_front();
      q->bytes -= next.size();
      if (q->dropped > q->dropped_told) {  // the console drains again: say what it missed
        next = "dp-launch: " + std::to_string(q->dropped - q->dropped_told) +
               " line(s) not shown: the console was not read (every rank's lines are in its log)\n" + next;
        q->dropped_told = q->dropped;
      }
      q->writing = true;
      lock.unlock();
      write_all(fd, next);
      lock.lock();
      q->writing = false;
      q->changed.notify_all();
    }
  }).detach();
}

Terminal::~Terminal() {
  status("");
  std::unique_lock<std::mutex> lock(queue_->mu);
  queue_->closing = true;
  queue_->changed.notify_all();
  queue_->changed.wait_for(lock, std::chrono::seconds(2),
                           [&] { return queue_->pending.empty() && !queue_->writing; });
}

size_t Terminal::dropped() const {
  std::lock_guard<std::mutex> lock(queue_->mu);
  return queue_->dropped;
}

size_t Terminal::columns() const {
  winsize ws{};
  if (::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void Terminal::enqueue(const std::string& bytes, bool is_line) {
  std::lock_guard<std::mutex> lock(queue_->mu);
  if (queue_->bytes + bytes.size() > kMaxQueuedBytes) {
    // A line is counted (the console is told once it drains); a status redraw is not
    // needed: the next one draws the whole line again.
    if (is_line) ++queue_->dropped;
    return;
  }
  queue_->bytes += bytes.size();
  queue_->pending.push_back(bytes);
  queue_->changed.notify_all();
}

void Terminal::line(const std::string& text) {
  // One write: the erased status, the line, the status again (no flicker, no interleaving).
  enqueue(status_.empty() ? text + "\n" : kEraseLine + text + "\n" + status_, true);
}

void Terminal::status(const std::string& text) {
  if (!live_) return;
  std::string cut = text.substr(0, columns() > 1 ? columns() - 1 : 0);  // the cursor's column stays free
  if (cut == status_) return;
  status_ = cut;
  enqueue(kEraseLine + status_, false);
}

}  // namespace zdp::launcher
