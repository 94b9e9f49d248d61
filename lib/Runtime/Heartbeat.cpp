//===- Heartbeat.cpp - Liveness and progress of every rank ----------------===//

#include "Heartbeat.h"
#include "Env.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sys/types.h>
#include <unistd.h>

namespace cleave::rt {

std::string RankStatus::encode() const {
  nlohmann::json groupsJson = nlohmann::json::object();
  for (const auto &[id, p] : groups) {
    nlohmann::json entry = {p.seq, p.op, p.active};
    if (p.call) {
      const Fingerprint &c = *p.call;
      entry.push_back({p.sinceMs, c.op, c.seq, c.group, c.count, c.extra,
                       c.dtype, c.reduce, c.peer, c.self});
    }
    groupsJson[std::to_string(id)] = entry;
  }
  nlohmann::json doc = {{"t", timeMs},    {"pid", pid},
                        {"host", host},   {"state", state},
                        {"error", error}, {"groups", groupsJson}};
  return doc.dump();
}

RankStatus RankStatus::decode(const std::string &text) {
  RankStatus status;
  try {
    nlohmann::json doc = nlohmann::json::parse(text);
    status.timeMs = doc.at("t").get<int64_t>();
    status.pid = doc.at("pid").get<int>();
    status.host = doc.at("host").get<std::string>();
    status.state = doc.at("state").get<std::string>();
    status.error = doc.at("error").get<std::string>();
    for (const auto &[id, p] : doc.at("groups").items()) {
      GroupProgress &g = status.groups[std::stoll(id)];
      g.seq = p.at(0).get<uint64_t>();
      g.op = p.at(1).get<std::string>();
      g.active = p.at(2).get<bool>();
      if (p.size() > 3) {
        const nlohmann::json &c = p.at(3);
        Fingerprint f;
        g.sinceMs = c.at(0).get<int64_t>();
        f.op = c.at(1).get<int32_t>();
        f.seq = c.at(2).get<uint64_t>();
        f.group = c.at(3).get<int64_t>();
        f.count = c.at(4).get<int64_t>();
        f.extra = c.at(5).get<uint64_t>();
        f.dtype = c.at(6).get<int32_t>();
        f.reduce = c.at(7).get<int32_t>();
        f.peer = c.at(8).get<int32_t>();
        f.self = c.at(9).get<int32_t>();
        g.call = f;
      }
    }
  } catch (const std::exception &e) {
    throw RuntimeError(concat("malformed heartbeat: ", e.what()));
  }
  return status;
}

Heartbeat::Heartbeat(std::unique_ptr<KvStore> store, std::string keyPrefix,
                     int rank, int64_t intervalMs,
                     std::function<RankStatus()> snapshot,
                     std::function<void(Heartbeat &)> watch)
    : store_(std::move(store)), prefix_(std::move(keyPrefix)), rank_(rank),
      intervalMs_(std::max<int64_t>(intervalMs, 10)),
      snapshot_(std::move(snapshot)), watch_(std::move(watch)) {
  publishNow();
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() { stop(); }

std::string Heartbeat::key(int rank) const {
  return concat(prefix_, "hb/", rank);
}

void Heartbeat::publishNow() {
  RankStatus status = snapshot_();
  status.timeMs = wallMillis();
  std::lock_guard<std::mutex> lock(mutex_);
  if (storeLost_)
    return;
  try {
    store_->put(key(rank_), status.encode());
  } catch (const std::exception &) {
    storeLost_ = true; // Rank 0's store is gone; diagnose() will say so.
  }
}

void Heartbeat::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(intervalMs_));
    if (stopping_)
      break;
    lock.unlock();
    publishNow();
    if (watch_)
      watch_(*this);
    lock.lock();
  }
}

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

std::optional<RankStatus> Heartbeat::read(int rank) {
  std::optional<std::string> text;
  try {
    text = store_->tryGet(key(rank));
  } catch (const std::exception &e) {
    throw RuntimeError(
        concat("cannot read the other ranks' heartbeats: ", e.what()));
  }
  if (!text)
    return std::nullopt;
  return RankStatus::decode(*text);
}

namespace {

/// True if process `pid` on this host has exited (gone or a zombie).
bool processExited(int pid) {
  if (pid <= 0)
    return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  return processState(pid) == 'Z';
}

std::string seconds(int64_t ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f s", double(ms) / 1000.0);
  return buffer;
}

/// One member's state in words and how much it explains a failure:
/// 3 gone (no heartbeat, stale, finalized), 2 failed, 1 behind, 0 fine.
std::string describeMember(int rank, const std::optional<RankStatus> &status,
                           int64_t staleMs, const GroupInfo &group,
                           uint64_t seq, int &severity) {
  severity = 3;
  if (!status)
    return concat("rank ", rank,
                  " has published no heartbeat (it never "
                  "initialized)");
  int64_t age = wallMillis() - status->timeMs;
  if (status->state == "finalized")
    return concat("rank ", rank, " has already called cleave_rt_finalize");
  // A rank that published its failure and then exited (it stops
  // heartbeating) is explained by its failure, not by its silence.
  if (status->state == "failed") {
    severity = 2;
    std::string error = status->error.substr(0, 240);
    return concat("rank ", rank, " failed: ", error,
                  error.size() < status->error.size() ? "..." : "");
  }
  if (age > staleMs) {
    std::string text =
        concat("rank ", rank, " stopped responding (last heartbeat ",
               seconds(age), " ago; pid ", status->pid, " on ", status->host);
    if (status->host == hostName() && processExited(status->pid))
      text += ", which has exited";
    return text + ")";
  }
  severity = 0;
  auto it = status->groups.find(group.id);
  GroupProgress p = it == status->groups.end() ? GroupProgress{} : it->second;
  std::string text = concat("rank ", rank, " is alive (heartbeat ",
                            seconds(std::max<int64_t>(age, 0)), " ago)");
  if (p.seq < seq) {
    severity = 1;
    text += concat(" but has not reached call #", seq, " on this group");
    text += p.seq == 0 ? std::string(": it has made no call there")
                       : concat(": its last call there is #", p.seq, " (", p.op,
                                p.active ? ", running)" : ", done)");
  } else if (p.seq > seq) {
    text += concat(" and is past it, at call #", p.seq, " (", p.op, ")");
  } else {
    text += concat(" and is in call #", p.seq, " (", p.op,
                   p.active ? ", running)" : ", done)");
  }
  return text;
}

} // namespace

std::string Heartbeat::diagnose(const GroupInfo &group, uint64_t seq) {
  double deadline = monotonicSeconds() + double(staleMs() + intervalMs_) / 1e3;
  std::vector<std::pair<int, std::string>> notes;
  for (;;) {
    notes.clear();
    int worst = 0;
    for (int member : group.members) {
      if (member == rank_)
        continue;
      std::optional<RankStatus> status;
      try {
        status = read(member);
      } catch (const std::exception &e) {
        return e.what();
      }
      int severity = 0;
      std::string text =
          describeMember(member, status, staleMs(), group, seq, severity);
      notes.emplace_back(severity, text);
      worst = std::max(worst, severity);
    }
    // A dead rank's heartbeat needs up to staleMs() to show; wait for it
    // unless someone is already known to be gone.
    if (worst == 3 || monotonicSeconds() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(intervalMs_ / 2));
  }
  std::stable_sort(
      notes.begin(), notes.end(),
      [](const auto &a, const auto &b) { return a.first > b.first; });
  // Report the strongest explanation only: a dead rank makes the others'
  // failures and delays mere consequences.
  int worst = notes.empty() ? 0 : notes.front().first;
  bool anyProblem = worst > 0;
  std::string out = anyProblem ? "" : "every other member is alive";
  size_t shown = 0;
  for (const auto &[severity, text] : notes) {
    if (severity != worst || shown == 8)
      continue;
    out += (out.empty() ? ""
                        : (anyProblem ? "; "
                           : shown    ? "; "
                                      : ": ")) +
           text;
    ++shown;
  }
  return out;
}

} // namespace cleave::rt
