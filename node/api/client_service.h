// gRPC service consensor.v1.Client: blobs in and out, task submission and status. Thin: the
// rules live in TaskManager and Store; this file maps them to RPCs and status codes.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "consensor/v1/node.grpc.pb.h"
#include "node/api/call_workers.h"
#include "node/api/client_gate.h"
#include "node/api/stream_budget.h"
#include "node/engine/task_manager.h"
#include "node/p2p/peer_rate_budget.h"
#include "node/p2p/peer_request_auth.h"
#include "node/p2p/signed_request_replays.h"
#include "node/storage/disk_budget.h"
#include "node/storage/store.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

grpc::Status ToGrpcStatus(const Status& status);

// SubmitTask, GetTask and RunTask are served with gRPC's callback API: gRPC's thread hands the
// call to the service's call workers (CallWorkers), which do the blocking part (authentication,
// admission, the synced write, the record read) and finish it; a RunTask waiting for its task
// holds no thread (the task manager's change listener resumes it). A RunTask whose admission
// cannot block (SubmitsWithoutWaiting) is admitted on gRPC's thread, and answered on the thread
// that finds its result durable, without a call worker. The streaming calls,
// GetNodeInfo and GetTrace stay on gRPC's synchronous server (threads bounded by rpc.max_streams).
using ClientServiceBase = v1::Client::WithCallbackMethod_SubmitTask<
    v1::Client::WithCallbackMethod_GetTask<v1::Client::WithCallbackMethod_RunTask<v1::Client::Service>>>;

struct ClientCallOptions {
  int workers = 8;                   // CallWorkers threads
  int64_t max_pending_calls = 1024;  // callback calls open at once; beyond: RESOURCE_EXHAUSTED
};

class ClientService final : public ClientServiceBase {
 public:
  using CallOptions = ClientCallOptions;
  // `node_info` fills the static part of GetNodeInfo (version, address, limits...).
  ClientService(Store* store, TaskManager* tasks, NodeMetrics* metrics, int64_t max_blob_bytes,
                std::function<void(v1::NodeInfo*)> node_info, CallOptions calls = {});
  ~ClientService() override;

  grpc::Status PutBlob(grpc::ServerContext* context, grpc::ServerReader<v1::PutBlobRequest>* reader,
                       v1::PutBlobResponse* response) override;
  grpc::Status GetBlob(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                       grpc::ServerWriter<v1::BlobChunk>* writer) override;
  grpc::ServerUnaryReactor* SubmitTask(grpc::CallbackServerContext* context, const v1::SubmitTaskRequest* request,
                                       v1::SubmitTaskResponse* response) override;
  grpc::ServerUnaryReactor* GetTask(grpc::CallbackServerContext* context, const v1::GetTaskRequest* request,
                                    v1::Task* response) override;
  grpc::Status WatchTask(grpc::ServerContext* context, const v1::WatchTaskRequest* request,
                         grpc::ServerWriter<v1::Task>* writer) override;
  grpc::ServerUnaryReactor* RunTask(grpc::CallbackServerContext* context, const v1::RunTaskRequest* request,
                                    v1::RunTaskResponse* response) override;
  grpc::Status GetNodeInfo(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                           v1::NodeInfo* response) override;
  grpc::Status GetTrace(grpc::ServerContext* context, const v1::GetTraceRequest* request,
                        v1::TraceResponse* response) override;

  // RunTask's longest wait (also what max_wait_ms = 0 asks for).
  static constexpr uint64_t kMaxRunTaskWaitMs = 600000;

  // Network mode: SubmitTask goes to the consensus engine (which announces the task).
  using Submitter = std::function<StatusOr<SubmitOutcome>(const v1::SubmitTaskRequest&)>;
  void SetSubmitter(Submitter submitter) { submitter_ = std::move(submitter); }
  // Fault injection only (`trickle-blobs`): GetBlob sends each blob's first chunk, then nothing
  // until the caller gives up.
  void StallServedBlobs() { stall_served_blobs_ = true; }
  // Fault injection only (`refuse-everywhere`): GetTask on the peer port answers UNAVAILABLE.
  void RefusePeers() { refuse_peers_ = true; }
  // Fault injection only (`corrupt-served-outputs`): the blobs (hex SHA-256) it says yes to are
  // served with their first byte flipped.
  void CorruptServedBlobs(std::function<bool(const std::string&)> corrupts) { corrupts_ = std::move(corrupts); }
  // Network mode: a client's GetBlob of a blob this node does not hold asks it (a certified
  // output a non-member fetches on demand; NOT_FOUND when it is none). Peers' calls never do.
  // `admit` charges the client's output_fetches_per_minute; the fetcher asks it only when the
  // request starts an outbound fetch (empty: no client budget).
  using MissingBlobFetcher = std::function<Status(const Hash256&, const std::function<Status()>& admit)>;
  void SetMissingBlobFetcher(MissingBlobFetcher fetcher) { fetch_missing_ = std::move(fetcher); }
  // Uploads and submissions are checked against it before anything is written (null: no checks).
  void SetDiskBudget(DiskBudget* budget) { budget_ = budget; }
  // Client identities and budgets (null: every caller is anonymous and unlimited).
  void SetGate(ClientGate* gate) { gate_ = gate; }

 private:
  friend class PeerFacingClientService;  // peers' calls skip the client gate (they are not clients)
  // The caller, or the UNAUTHENTICATED status to answer with.
  std::optional<ClientIdentity> Authenticate(grpc::ServerContextBase* context, grpc::Status* refusal);
  class RunTaskCall;
  struct RunTaskState;
  // Takes a callback call's place among max_pending_calls (false: the call is refused).
  bool OpenPendingCall();
  // A unary call done on the call workers: `serve` runs there and its status finishes the call.
  grpc::ServerUnaryReactor* ServeOnWorkers(grpc::CallbackServerContext* context, const char* method,
                                           std::function<grpc::Status()> serve);
  grpc::Status PutBlobImpl(grpc::ServerContext* context, grpc::ServerReader<v1::PutBlobRequest>* reader,
                           v1::PutBlobResponse* response, const ClientIdentity* who);
  // `who` is the client (null for a peer): only a client's missing blob may be fetched on demand
  // (never for a peer: no fetch chains).
  grpc::Status GetBlobImpl(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                           grpc::ServerWriter<v1::BlobChunk>* writer, const ClientIdentity* who);
  // `record` kDeferred: RunTask's, on a single node; the record is not synced before this returns
  // (TaskManager::Submit), and the call answers only after the result's sync, which covers it.
  grpc::Status SubmitTaskImpl(const v1::SubmitTaskRequest* request, v1::SubmitTaskResponse* response,
                              const ClientIdentity* who, Durability record = Durability::kSynced);
  // Whether a RunTask of `request` by `who` can be admitted and stored on gRPC's own thread: a
  // single node (no announcement), no client budget whose check reads task records or writes
  // the client's disk charge, and a warm task (TaskManager::IsWarm), so that nothing on the way
  // waits for a sync, reads a blob or compiles.
  bool SubmitsWithoutWaiting(const ClientIdentity& who, const v1::SubmitTaskRequest& request) const;
  grpc::Status GetTaskImpl(const v1::GetTaskRequest* request, v1::Task* response);
  grpc::Status WatchTaskImpl(grpc::ServerContext* context, const v1::WatchTaskRequest* request,
                             grpc::ServerWriter<v1::Task>* writer, const ClientIdentity* who);
  grpc::Status GetNodeInfoImpl(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                               v1::NodeInfo* response);
  grpc::Status GetTraceImpl(grpc::ServerContext* context, const v1::GetTraceRequest* request,
                            v1::TraceResponse* response);
  void UpdateStoreGauges();

  Store* store_;
  TaskManager* tasks_;
  NodeMetrics* metrics_;
  int64_t max_blob_bytes_;
  std::function<void(v1::NodeInfo*)> node_info_;
  Submitter submitter_;
  bool stall_served_blobs_ = false;
  bool refuse_peers_ = false;  // fault injection: peers' GetTask answered UNAVAILABLE
  std::function<bool(const std::string&)> corrupts_;
  MissingBlobFetcher fetch_missing_;
  DiskBudget* budget_ = nullptr;
  ClientGate* gate_ = nullptr;
  const int64_t max_pending_calls_;
  // Callback calls open (shared: a call's end may come after the service is gone).
  std::shared_ptr<std::atomic<int64_t>> pending_calls_;
  // Shared with the calls (a late listener or alarm of a finished call may still post to it).
  std::shared_ptr<CallWorkers> workers_;
};

// The per-peer rates of the peer port's unary calls (node/p2p/peer_rate_budget.h); null or empty
// members impose nothing.
struct PeerCallGuards {
  // GetTask and GetNodeInfo calls per second, per verified operator (a host's unsigned calls
  // share one) and per remote host.
  PeerRateBudget* lookups = nullptr;
  // Signature checks per remote host, taken before a signed request's signature is checked
  // (shared with gossip: GossipNetwork::signature_checks()).
  PeerRateBudget* signature_checks = nullptr;
  // Who signed a GetTask or GetNodeInfo request (VerifyGetTask, VerifyGetNodeInfo); without
  // one every such request counts as unsigned.
  std::function<PeerRequestAuth(const v1::GetTaskRequest&)> verify_task;
  std::function<PeerRequestAuth(const v1::GetNodeInfoRequest&)> verify_node_info;
  // Each verified signed request (GetBlob, GetTask, GetNodeInfo) is served once: a replay is
  // UNAUTHENTICATED before it is charged to its operator's budgets (shared with gossip's Pull:
  // GossipNetwork::signed_request_replays()).
  SignedRequestReplays* replays = nullptr;
};

// consensor.v1.Client on the peer listener (p2p.listen): only the calls other operators make
// (GetBlob for a task's blobs, GetTask for a certified result, GetNodeInfo), answered by the
// client API's service. Uploads, submissions, watches and RunTask are refused with UNIMPLEMENTED, so a
// client cannot take the peers' threads with long-lived streams.
class PeerFacingClientService final : public v1::Client::Service {
 public:
  // Who signed a GetBlob request (node/p2p/peer_request_auth.h, VerifyGetBlob).
  using RequestVerifier = std::function<GetBlobAuth(const v1::GetBlobRequest&)>;
  // `streams` bounds concurrent GetBlob streams per requester and per remote host (null: no
  // bound). `verify` checks signed requests; without it every request counts as unsigned.
  // `guards` rate the unary calls and the signature checks.
  explicit PeerFacingClientService(ClientService* client, StreamBudget* streams = nullptr,
                                   RequestVerifier verify = nullptr, PeerCallGuards guards = {})
      : client_(client), streams_(streams), verify_(std::move(verify)), guards_(std::move(guards)) {}

  grpc::Status PutBlob(grpc::ServerContext* context, grpc::ServerReader<v1::PutBlobRequest>* reader,
                       v1::PutBlobResponse* response) override;
  grpc::Status GetBlob(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                       grpc::ServerWriter<v1::BlobChunk>* writer) override;
  grpc::Status SubmitTask(grpc::ServerContext* context, const v1::SubmitTaskRequest* request,
                          v1::SubmitTaskResponse* response) override;
  grpc::Status GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request, v1::Task* response) override;
  grpc::Status WatchTask(grpc::ServerContext* context, const v1::WatchTaskRequest* request,
                         grpc::ServerWriter<v1::Task>* writer) override;
  grpc::Status RunTask(grpc::ServerContext* context, const v1::RunTaskRequest* request,
                       v1::RunTaskResponse* response) override;
  grpc::Status GetNodeInfo(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                           v1::NodeInfo* response) override;
  grpc::Status GetTrace(grpc::ServerContext* context, const v1::GetTraceRequest* request,
                        v1::TraceResponse* response) override;

 private:
  ClientService* client_;
  StreamBudget* streams_;
  RequestVerifier verify_;
  PeerCallGuards guards_;
};

}  // namespace consensor::node
