// HeartbeatRecord's text form (runtime/internal/heartbeat.h).
#include "runtime/internal/heartbeat.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace zdp {
namespace {

constexpr size_t kMaxHeartbeatBytes = 16384;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

// Digits only (from_chars takes no sign for an unsigned type), within uint64 (strtoull
// would saturate "99999999999999999999").
bool to_u64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

bool to_i64(const std::string& s, int64_t* out) {
  uint64_t u = 0;
  if (!s.empty() && s[0] == '-') {
    if (!to_u64(s.substr(1), &u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = -static_cast<int64_t>(u);
    return true;
  }
  if (!to_u64(s, &u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = static_cast<int64_t>(u);
  return true;
}

bool to_double(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end != nullptr && *end == '\0' && *out >= 0 && *out < 1e12;
}

}  // namespace

std::string encode_heartbeat(const HeartbeatRecord& r) {
  std::ostringstream o;
  o << "beat=" << r.beat << "\npid=" << r.pid << "\nhost=" << r.host << "\ninterval_s=" << r.interval_s
    << "\nstep=" << r.step << "\n";
  if (r.has_comm) {
    o << "issued=" << r.comm.issued << "\ncompleted=" << r.comm.completed << "\nidle_s=" << r.comm.idle_s
      << "\nfingerprint=" << r.comm.fingerprint << "\n";
    if (r.comm.in_flight) {
      o << "current_seq=" << r.comm.current.seq << "\ncurrent_s=" << r.comm.current_s
        << "\ncurrent_signature=" << r.current_signature << "\ncurrent=" << r.current << "\n";
    }
  }
  for (const RecentCollective& c : r.recent) o << "recent=" << c.seq << " " << c.signature << " " << c.text << "\n";
  if (!r.marks.empty()) {
    o << "marks=";
    for (size_t i = 0; i < r.marks.size(); ++i) {
      o << (i ? "," : "") << r.marks[i].step << ":" << r.marks[i].issued << ":" << r.marks[i].fingerprint;
    }
    o << "\n";
  }
  return o.str();
}

StatusOr<HeartbeatRecord> decode_heartbeat(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, "malformed heartbeat: " + why);
  };
  if (text.size() > kMaxHeartbeatBytes) return bad(std::to_string(text.size()) + " bytes");
  std::map<std::string, std::string> fields;
  std::vector<RecentCollective> recent;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return bad("line '" + line.substr(0, 40) + "' is not key=value");
    if (line.compare(0, eq, "recent") != 0) {
      fields[line.substr(0, eq)] = line.substr(eq + 1);
      continue;
    }
    const std::string value = line.substr(eq + 1);
    const size_t a = value.find(' '), b = a == std::string::npos ? a : value.find(' ', a + 1);
    RecentCollective c;
    if (b == std::string::npos || !to_u64(value.substr(0, a), &c.seq) ||
        !to_u64(value.substr(a + 1, b - a - 1), &c.signature)) {
      return bad("recent collective '" + value.substr(0, 40) + "' is not 'seq signature text'");
    }
    c.text = value.substr(b + 1);
    if (recent.size() < 4 * HeartbeatRecord::kRecent) recent.push_back(std::move(c));
  }
  HeartbeatRecord r;
  r.recent = std::move(recent);
  bool ok = to_u64(fields["beat"], &r.beat) && to_i64(fields["pid"], &r.pid) &&
            to_double(fields["interval_s"], &r.interval_s) && to_i64(fields["step"], &r.step);
  r.host = fields["host"];
  if (!ok) return bad("beat, pid, interval_s or step missing or not a number");
  if (fields.count("issued")) {
    r.has_comm = true;
    ok = to_u64(fields["issued"], &r.comm.issued) && to_u64(fields["completed"], &r.comm.completed) &&
         to_double(fields["idle_s"], &r.comm.idle_s) && to_u64(fields["fingerprint"], &r.comm.fingerprint);
    if (!ok) return bad("a communicator field is not a number");
  }
  if (fields.count("current_seq")) {
    r.comm.in_flight = true;
    ok = to_u64(fields["current_seq"], &r.comm.current.seq) && to_double(fields["current_s"], &r.comm.current_s) &&
         to_u64(fields["current_signature"], &r.current_signature);
    if (!ok) return bad("a field of the current collective is not a number");
    r.current = fields["current"];
  }
  if (fields.count("marks")) {
    std::istringstream marks(fields["marks"]);
    for (std::string mark; std::getline(marks, mark, ',') && r.marks.size() < 64;) {
      const size_t a = mark.find(':'), b = mark.rfind(':');
      StepMark m;
      if (a == std::string::npos || a == b || !to_i64(mark.substr(0, a), &m.step) ||
          !to_u64(mark.substr(a + 1, b - a - 1), &m.issued) || !to_u64(mark.substr(b + 1), &m.fingerprint)) {
        return bad("step mark '" + mark.substr(0, 60) + "' is not step:issued:fingerprint");
      }
      r.marks.push_back(m);
    }
  }
  return r;
}

std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 10, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
}

std::string describe_rank(int rank, const HeartbeatRecord& r) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(r.pid) + ", host " + r.host + ")";
}

std::string describe_position(const HeartbeatRecord& r) {
  std::string s = r.step >= 0 ? "in step " + std::to_string(r.step) : "before its first step";
  if (!r.has_comm) return s + ", before its communicator was up";
  if (r.comm.in_flight) return s + ", at " + r.current + " for " + seconds(r.comm.current_s);
  if (r.comm.issued == 0) return s + ", before its first collective";
  return s + ", between collectives (#" + std::to_string(r.comm.issued - 1) + " finished " +
         seconds(r.comm.idle_s) + " ago)";
}

}  // namespace zdp

namespace zdp::heartbeat_keys {
std::string beat(int rank) { return "zdp/heartbeat/" + std::to_string(rank); }
std::string flight_printed(int rank) { return "zdp/flight_printed/" + std::to_string(rank); }
std::string exited(int rank) { return "zdp/exited/" + std::to_string(rank); }
}  // namespace zdp::heartbeat_keys
