#include "node/storage/client_disk_ledger.h"

#include <utility>
#include <vector>

namespace consensor::node {

namespace {

constexpr std::string_view kPrefix = "client/";

std::string OwnershipKey(char kind, const std::string& client, const std::string& object) {
  return std::string(kPrefix) + kind + "/" + client + "/" + object;
}

std::string Bytes(int64_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace

Status ClientDiskLedger::Load() {
  struct Entry {
    std::string key;
    char kind;
    std::string client;
    std::string object;
    int64_t bytes;
  };
  std::vector<Entry> entries;
  std::vector<std::string> malformed;
  RETURN_IF_ERROR(store_->ForEachMeta(std::string(kPrefix), [&](const std::string& key, const std::string& value) {
    // client/<kind>/<client>/<object hex>
    const std::string rest = key.substr(kPrefix.size());
    const size_t last = rest.rfind('/');
    int64_t bytes = -1;
    try {
      bytes = std::stoll(value);
    } catch (...) {
      bytes = -1;
    }
    if (rest.size() < 4 || rest[1] != '/' || last == std::string::npos || last <= 2 || bytes < 0 ||
        (rest[0] != 'b' && rest[0] != 't')) {
      malformed.push_back(key);
      return OkStatus();
    }
    entries.push_back({key, rest[0], rest.substr(2, last - 2), rest.substr(last + 1), bytes});
    return OkStatus();
  }));
  for (const std::string& key : malformed) RETURN_IF_ERROR(store_->DeleteMeta(key));
  std::lock_guard<std::mutex> lock(mu_);
  usage_.clear();
  owners_.clear();
  for (const Entry& e : entries) {
    // An object deleted while its ownership key survived (a crash between the two writes) is
    // charged to nobody.
    bool present = false;
    if (e.kind == 'b') {
      auto sha = Hash256FromHex(e.object);
      present = sha.ok() && store_->BlobSize(*sha).ok();
    } else {
      auto raw = BytesFromHex(e.object);
      if (raw.ok()) {
        auto task = store_->GetTask(std::string(raw->begin(), raw->end()));
        present = task.ok() && task->has_value();
      }
    }
    if (!present) {
      RETURN_IF_ERROR(store_->DeleteMeta(e.key));
      continue;
    }
    owners_[{e.kind, e.object}][e.client] = e.bytes;
    usage_[e.client].stored += e.bytes;
  }
  return OkStatus();
}

Status ClientDiskLedger::Admit(const std::string& client, int64_t limit, int64_t bytes, std::string_view write,
                               bool claim) {
  if (bytes < 0) return InvalidArgument("negative write size");
  std::lock_guard<std::mutex> lock(mu_);
  Usage& u = usage_[client];
  if (limit > 0 && (u.stored + u.claimed > limit || bytes > limit - u.stored - u.claimed)) {
    const Usage seen = u;
    DropIfIdle(client);
    return ResourceExhausted(std::string(write) + " refused: client '" + client + "' is over its disk budget (" +
                             "max_disk_bytes = " + Bytes(limit) + "): " + Bytes(seen.stored) + " stored, " +
                             Bytes(seen.claimed) + " in uploads, " + Bytes(bytes) +
                             " more asked; its space returns when retention deletes its finished tasks and blobs");
  }
  if (claim) {
    u.claimed += bytes;
  } else {
    DropIfIdle(client);
  }
  return OkStatus();
}

Status ClientDiskLedger::Check(const std::string& client, int64_t limit, int64_t bytes, std::string_view write) {
  return Admit(client, limit, bytes, write, /*claim=*/false);
}

StatusOr<ClientDiskLedger::Claim> ClientDiskLedger::Reserve(const std::string& client, int64_t limit, int64_t bytes,
                                                            std::string_view write) {
  RETURN_IF_ERROR(Admit(client, limit, bytes, write, /*claim=*/true));
  Claim c;
  c.ledger_ = this;
  c.client_ = client;
  c.limit_ = limit;
  c.write_ = std::string(write);
  c.bytes_ = bytes;
  return c;
}

ClientDiskLedger::Claim& ClientDiskLedger::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    client_ = std::move(other.client_);
    limit_ = other.limit_;
    write_ = std::move(other.write_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Status ClientDiskLedger::Claim::GrowTo(int64_t total) {
  if (ledger_ == nullptr) return FailedPrecondition("claim is released");
  if (total <= bytes_) return OkStatus();
  RETURN_IF_ERROR(ledger_->Admit(client_, limit_, total - bytes_, write_, /*claim=*/true));
  bytes_ = total;
  return OkStatus();
}

void ClientDiskLedger::Claim::Release() {
  if (ledger_ == nullptr) return;
  std::lock_guard<std::mutex> lock(ledger_->mu_);
  auto it = ledger_->usage_.find(client_);
  if (it != ledger_->usage_.end()) {
    it->second.claimed -= bytes_;
    ledger_->DropIfIdle(client_);
  }
  ledger_ = nullptr;
  bytes_ = 0;
}

Status ClientDiskLedger::Add(char kind, const std::string& client, const std::string& object, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& owners = owners_[{kind, object}];
    if (owners.count(client)) return OkStatus();
  }
  // Persisted first: a crash after it leaves a charge that Load checks against the store.
  RETURN_IF_ERROR(store_->PutMeta(OwnershipKey(kind, client, object), std::to_string(bytes)));
  std::lock_guard<std::mutex> lock(mu_);
  auto& owners = owners_[{kind, object}];
  if (owners.emplace(client, bytes).second) usage_[client].stored += bytes;
  return OkStatus();
}

Status ClientDiskLedger::AddBlob(const std::string& client, const Hash256& sha256, int64_t bytes) {
  return Add('b', client, ToHex(sha256), bytes);
}

Status ClientDiskLedger::AddTask(const std::string& client, const std::string& task_id_hex, int64_t bytes) {
  return Add('t', client, task_id_hex, bytes);
}

void ClientDiskLedger::Deleted(char kind, const std::string& object) {
  std::map<std::string, int64_t> owners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owners_.find({kind, object});
    if (it == owners_.end()) return;
    owners = std::move(it->second);
    owners_.erase(it);
    for (const auto& [client, bytes] : owners) {
      auto u = usage_.find(client);
      if (u == usage_.end()) continue;
      u->second.stored -= bytes;
      DropIfIdle(client);
    }
  }
  // A key left behind by a failed delete is dropped by the next Load (its object is gone).
  for (const auto& [client, bytes] : owners) (void)store_->DeleteMeta(OwnershipKey(kind, client, object));
}

void ClientDiskLedger::BlobDeleted(const Hash256& sha256) { Deleted('b', ToHex(sha256)); }
void ClientDiskLedger::TaskDeleted(const std::string& task_id_hex) { Deleted('t', task_id_hex); }

void ClientDiskLedger::DropIfIdle(const std::string& client) {
  auto it = usage_.find(client);
  if (it != usage_.end() && it->second.stored == 0 && it->second.claimed == 0) usage_.erase(it);
}

int64_t ClientDiskLedger::StoredBytes(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = usage_.find(client);
  return it == usage_.end() ? 0 : it->second.stored;
}

std::map<std::string, int64_t> ClientDiskLedger::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> totals;
  for (const auto& [client, u] : usage_) totals[client] = u.stored;
  return totals;
}

}  // namespace consensor::node
