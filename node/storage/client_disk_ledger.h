// Per-client disk accounting: the bytes of the blobs each client uploaded and of the task
// records it submitted, next to the node's quota in DiskBudget (docs/NODE.md, "Clients").
//
// Ownership is persisted in the store's meta column family, one key per (client, object):
//   client/b/<client>/<blob sha256 hex>  -> charged bytes
//   client/t/<client>/<task id hex>      -> charged bytes
// so a restart rebuilds the same totals (Load), dropping entries whose object is gone. Retention
// reports each deletion (BlobDeleted, TaskDeleted) and the owners' totals drop at once. A blob
// that two clients uploaded is charged to both: each asked the node to keep it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "common/sha256.h"
#include "common/status.h"
#include "node/storage/store.h"

namespace consensor::node {

class ClientDiskLedger {
 public:
  explicit ClientDiskLedger(Store* store) : store_(store) {}

  // Rebuilds the totals from the store's ownership keys. Call once at startup, before serving.
  Status Load();

  // A client's claim on its own budget while an upload streams in; released when destroyed.
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& other) noexcept { *this = std::move(other); }
    Claim& operator=(Claim&& other) noexcept;
    ~Claim() { Release(); }
    // Claims up to `total` bytes; RESOURCE_EXHAUSTED (and nothing more claimed) over the budget.
    Status GrowTo(int64_t total);
    void Release();

   private:
    friend class ClientDiskLedger;
    ClientDiskLedger* ledger_ = nullptr;
    std::string client_;
    int64_t limit_ = 0;
    std::string write_;
    int64_t bytes_ = 0;
  };

  // OK when `client` may store `bytes` more under `limit` (0: no limit); RESOURCE_EXHAUSTED
  // naming the client and the budget otherwise.
  Status Check(const std::string& client, int64_t limit, int64_t bytes, std::string_view write);
  StatusOr<Claim> Reserve(const std::string& client, int64_t limit, int64_t bytes, std::string_view write);

  // Charges a stored object to `client` (persisted, synced). Charging the same object to the same
  // client twice is a no-op.
  Status AddBlob(const std::string& client, const Hash256& sha256, int64_t bytes);
  Status AddTask(const std::string& client, const std::string& task_id_hex, int64_t bytes);

  // Retention deleted the object: its owners are no longer charged for it.
  void BlobDeleted(const Hash256& sha256);
  void TaskDeleted(const std::string& task_id_hex);

  // Stored bytes charged to `client` (not counting claims of running uploads).
  int64_t StoredBytes(const std::string& client) const;
  // Every client with a charge, and its stored bytes.
  std::map<std::string, int64_t> Totals() const;

 private:
  struct Usage {
    int64_t stored = 0;
    int64_t claimed = 0;
  };
  Status Admit(const std::string& client, int64_t limit, int64_t bytes, std::string_view write, bool claim);
  Status Add(char kind, const std::string& client, const std::string& object, int64_t bytes);
  void Deleted(char kind, const std::string& object);
  void DropIfIdle(const std::string& client);

  Store* store_;
  mutable std::mutex mu_;
  std::map<std::string, Usage, std::less<>> usage_;
  // (kind, object) -> owner -> bytes; kind is 'b' (blob) or 't' (task).
  std::map<std::pair<char, std::string>, std::map<std::string, int64_t>> owners_;
};

}  // namespace consensor::node
