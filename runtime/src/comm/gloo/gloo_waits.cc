// GlooWaits (gloo_waits.h).
#include "runtime/src/comm/gloo/gloo_waits.h"

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>

namespace zdp {

void GlooWaits::wait(gloo::transport::UnboundBuffer& buffer, bool recv, std::chrono::milliseconds timeout) {
  const std::pair<gloo::transport::UnboundBuffer*, bool> entry{&buffer, recv};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) throw GlooWaitAborted();
    waiting_.push_back(entry);
  }
  struct Leave {  // however the wait ends (it throws on a timeout)
    GlooWaits& waits;
    std::pair<gloo::transport::UnboundBuffer*, bool> entry;
    ~Leave() {
      std::lock_guard<std::mutex> lock(waits.mu_);
      waits.waiting_.erase(std::find(waits.waiting_.begin(), waits.waiting_.end(), entry));
    }
  } leave{*this, entry};
  // Gloo's abortWait* sets a flag the wait reads: one set before the wait began ends it too.
  const bool completed = recv ? buffer.waitRecv(timeout) : buffer.waitSend(timeout);
  if (!completed) throw GlooWaitAborted();
}

void GlooWaits::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  for (const auto& [buffer, recv] : waiting_) {
    if (recv) {
      buffer->abortWaitRecv();
    } else {
      buffer->abortWaitSend();
    }
  }
}

void wait_on(GlooWaits* waits, gloo::transport::UnboundBuffer& buffer, bool recv, std::chrono::milliseconds timeout) {
  if (waits != nullptr) {
    waits->wait(buffer, recv, timeout);
  } else if (recv) {
    buffer.waitRecv(timeout);
  } else {
    buffer.waitSend(timeout);
  }
}

}  // namespace zdp
