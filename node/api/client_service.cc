#include "node/api/client_service.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <variant>

#include <grpcpp/alarm.h>

#include "common/address.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "consensus/task.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

// Counts a finished RPC by method and status code (consensor_rpc_requests_total).
grpc::Status Count(NodeMetrics* metrics, const char* method, grpc::Status status) {
  metrics->RpcRequests(method, static_cast<int>(status.error_code()))->Increment();
  return status;
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // StatusCode values are gRPC's by construction (common/status.h).
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

ClientService::ClientService(Store* store, TaskManager* tasks, NodeMetrics* metrics, int64_t max_blob_bytes,
                             std::function<void(v1::NodeInfo*)> node_info, CallOptions calls)
    : store_(store),
      tasks_(tasks),
      metrics_(metrics),
      max_blob_bytes_(max_blob_bytes),
      node_info_(std::move(node_info)),
      max_pending_calls_(calls.max_pending_calls),
      pending_calls_(std::make_shared<std::atomic<int64_t>>(0)),
      workers_(std::make_shared<CallWorkers>(calls.workers)) {
  UpdateStoreGauges();
}

// The server has shut down (every call finished) before the service goes.
ClientService::~ClientService() { workers_->Stop(); }

void ClientService::UpdateStoreGauges() {
  Store::Stats stats = store_->GetStats();
  metrics_->blobs_stored->Set(static_cast<double>(stats.blob_count));
  metrics_->blobs_stored_bytes->Set(static_cast<double>(stats.blob_bytes));
}

std::optional<ClientIdentity> ClientService::Authenticate(grpc::ServerContextBase* context, grpc::Status* refusal) {
  if (gate_ == nullptr) return ClientIdentity{"ip:" + context->peer(), "anonymous", ClientBudgets{}};
  std::optional<std::string_view> authorization;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  std::string error;
  auto who = gate_->Authenticate(authorization, context->peer(), &error);
  if (!who) *refusal = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, error);
  return who;
}

grpc::Status ClientService::PutBlobImpl(grpc::ServerContext* context, grpc::ServerReader<v1::PutBlobRequest>* reader,
                                        v1::PutBlobResponse* response, const ClientIdentity* who) {
  v1::PutBlobRequest message;
  std::optional<Hash256> expected;
  std::unique_ptr<BlobWriter> writer;
  // The upload's claim on the disk budget: the declared size up front, then the running size,
  // each checked before the bytes are written.
  DiskBudget::Reservation claim;
  // The client's own claim on its disk budget, beside the node's (only while it has one).
  ClientDiskLedger* ledger =
      gate_ != nullptr && who != nullptr && who->budgets.max_disk_bytes > 0 ? gate_->disk() : nullptr;
  ClientDiskLedger::Claim client_claim;
  auto client_refused = [&](Status s) {
    gate_->CountRefusal(*who, "max_disk_bytes");
    return ToGrpcStatus(s);
  };
  int64_t declared = 0;
  int64_t received = 0;
  bool first = true;
  while (reader->Read(&message)) {
    const std::string& data = message.data();
    if (first) {
      if (!message.expected_sha256().empty()) {
        auto h = Hash256FromHex(message.expected_sha256());
        if (!h.ok()) return ToGrpcStatus(InvalidArgument("expected_sha256: " + h.status().message()));
        expected = *h;
      }
      if (message.size() > static_cast<uint64_t>(max_blob_bytes_)) {
        return ToGrpcStatus(ResourceExhausted("declared blob size " + std::to_string(message.size()) +
                                              " is over the cap of " + std::to_string(max_blob_bytes_) + " bytes"));
      }
      declared = static_cast<int64_t>(message.size());
      if (budget_ != nullptr) {
        auto r = budget_->Reserve(std::max<int64_t>(declared, static_cast<int64_t>(data.size())), "blob upload");
        if (!r.ok()) return ToGrpcStatus(r.status());
        claim = std::move(r).value();
      }
      if (ledger != nullptr) {
        auto c = ledger->Reserve(who->id, who->budgets.max_disk_bytes,
                                 std::max<int64_t>(declared, static_cast<int64_t>(data.size())), "blob upload");
        if (!c.ok()) return client_refused(c.status());
        client_claim = std::move(c).value();
      }
      auto w = store_->NewBlobWriter(expected, max_blob_bytes_);
      if (!w.ok()) return ToGrpcStatus(w.status());
      writer = std::move(w).value();
      first = false;
    } else if (!message.expected_sha256().empty() || message.size() != 0) {
      return ToGrpcStatus(
          InvalidArgument("expected_sha256 and size may only be set in the first message of an upload"));
    }
    received += static_cast<int64_t>(data.size());
    if (declared > 0 && received > declared) {
      return ToGrpcStatus(
          InvalidArgument("upload sent more than its declared size of " + std::to_string(declared) + " bytes"));
    }
    if (budget_ != nullptr) {
      if (Status s = claim.GrowTo(received); !s.ok()) return ToGrpcStatus(s);
    }
    if (ledger != nullptr) {
      if (Status s = client_claim.GrowTo(received); !s.ok()) return client_refused(s);
    }
    Status s = writer->Append(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
    if (!s.ok()) return ToGrpcStatus(s);
  }
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "upload cancelled by the client");
  if (declared > 0 && received != declared) {
    return ToGrpcStatus(InvalidArgument("upload ended after " + std::to_string(received) +
                                        " bytes, short of its declared size of " + std::to_string(declared)));
  }
  if (!writer) {  // no messages at all: the empty blob
    if (budget_ != nullptr) {
      auto r = budget_->Reserve(0, "blob upload");
      if (!r.ok()) return ToGrpcStatus(r.status());
      claim = std::move(r).value();
    }
    auto w = store_->NewBlobWriter(std::nullopt, max_blob_bytes_);
    if (!w.ok()) return ToGrpcStatus(w.status());
    writer = std::move(w).value();
  }
  auto info = writer->Commit();
  if (!info.ok()) return ToGrpcStatus(info.status());
  if (ledger != nullptr) {
    // Charged even when the content was already here: this client asked the node to keep it too.
    if (Status s = ledger->AddBlob(who->id, info->sha256, info->size); !s.ok()) return ToGrpcStatus(s);
  }
  response->set_sha256(ToHex(info->sha256));
  response->set_size(static_cast<uint64_t>(info->size));
  response->set_already_present(info->already_present);
  if (!info->already_present) {
    metrics_->blobs_received->Increment();
    metrics_->blob_bytes_received->Increment(static_cast<double>(info->size));
  }
  UpdateStoreGauges();
  Log(LogLevel::kDebug, "blob stored",
      {{"sha256", response->sha256()},
       {"bytes", static_cast<int64_t>(info->size)},
       {"already_present", info->already_present}});
  return grpc::Status::OK;
}

grpc::Status ClientService::GetBlobImpl(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                                        grpc::ServerWriter<v1::BlobChunk>* writer, const ClientIdentity* who) {
  const bool from_client = who != nullptr;
  auto h = Hash256FromHex(request->sha256());
  if (!h.ok()) return ToGrpcStatus(InvalidArgument("sha256: " + h.status().message()));
  auto size = store_->BlobSize(*h);
  if (!size.ok() && size.status().code() == StatusCode::kNotFound && from_client && fetch_missing_) {
    // A certified output this node recorded without its bytes: fetched and checked first.
    // The client's budget is charged only when its request makes this node dial the holders.
    std::function<Status()> admit;
    if (gate_ != nullptr && who != nullptr) admit = [this, who] { return gate_->AdmitOutputFetch(*who); };
    if (Status fetched = fetch_missing_(*h, admit); !fetched.ok()) return ToGrpcStatus(fetched);
    size = store_->BlobSize(*h);
  }
  if (!size.ok()) {
    if (size.status().code() == StatusCode::kNotFound) {
      return ToGrpcStatus(NotFound("blob " + request->sha256() + " is not stored on this node"));
    }
    return ToGrpcStatus(size.status());
  }
  v1::BlobChunk chunk;
  chunk.set_total_size(static_cast<uint64_t>(*size));
  bool sent_any = false;
  bool corrupt = corrupts_ && corrupts_(request->sha256());
  Status s = store_->ReadBlob(*h, [&](std::span<const uint8_t> piece) -> Status {
    if (context->IsCancelled()) return Cancelled("client cancelled");
    chunk.set_data(piece.data(), piece.size());
    if (corrupt && !piece.empty()) {  // fault injection: the first byte flipped
      (*chunk.mutable_data())[0] ^= 0x01;
      corrupt = false;
    }
    if (!writer->Write(chunk)) return Cancelled("client went away");
    sent_any = true;
    metrics_->blob_bytes_sent->Increment(static_cast<double>(piece.size()));
    if (stall_served_blobs_) {
      // The adoption staller: hold the fetcher (and this thread) as long as it waits, capped.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
      while (!context->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return Cancelled("fault injection: blob stalled after its first chunk");
    }
    return OkStatus();
  });
  if (!s.ok()) return ToGrpcStatus(s);
  if (!sent_any) {  // the empty blob still answers with one chunk carrying the size
    chunk.clear_data();
    writer->Write(chunk);
  }
  return grpc::Status::OK;
}

bool ClientService::SubmitsWithoutWaiting(const ClientIdentity& who, const v1::SubmitTaskRequest& request) const {
  if (submitter_) return false;  // network mode: the engine plans, stores synced and announces
  // max_tasks_in_flight reads the client's task records (a read may wait for a sync),
  // flops_per_minute reads each input's header from the store, and max_disk_bytes writes the
  // client's charge synced.
  const ClientBudgets& b = who.budgets;
  if (gate_ != nullptr && (b.max_tasks_in_flight > 0 || b.flops_per_minute > 0 || b.max_disk_bytes > 0)) return false;
  return tasks_->IsWarm(request);
}

grpc::Status ClientService::SubmitTaskImpl(const v1::SubmitTaskRequest* request, v1::SubmitTaskResponse* response,
                                           const ClientIdentity* who, Durability record) {
  const int64_t record_bytes = static_cast<int64_t>(request->ByteSizeLong()) + 256;
  // The client's budgets first, then the node's disk; all before the engine announces the task
  // or anything is stored (TaskManager checks the disk again).
  Status admission = OkStatus();
  int64_t flops = 0;
  bool admitted = false;
  if (gate_ != nullptr && who != nullptr) {
    TaskManager* tasks = tasks_;
    admission = gate_->AdmitSubmission(
        *who, [tasks, request] { return tasks->CountFlops(*request); },
        [tasks](const std::string& hex) {
          auto id = consensus::TaskId::FromHex(hex);
          if (!id.ok()) return true;
          auto task = tasks->Get(*id);
          return !task.ok() || consensus::IsFinal(static_cast<consensus::TaskState>(task->state()));
        },
        &flops);
    admitted = admission.ok();
    if (admission.ok() && who->budgets.max_disk_bytes > 0 && gate_->disk() != nullptr) {
      Status s = gate_->disk()->Check(who->id, who->budgets.max_disk_bytes, record_bytes, "task submission");
      if (!s.ok()) {
        gate_->CountRefusal(*who, "max_disk_bytes");
        admission = s;
      }
    }
  }
  // A network node checks the disk before the engine plans and announces the task. A single
  // node's TaskManager::Submit checks the same budget, with the same label, before it writes a
  // new record (a known task writes nothing): a second check here would be a second statvfs.
  if (admission.ok() && budget_ != nullptr && submitter_) admission = budget_->Check(record_bytes, "task submission");
  StatusOr<SubmitOutcome> outcome =
      !admission.ok() ? StatusOr<SubmitOutcome>(admission)
                      : (submitter_ ? submitter_(*request) : tasks_->Submit(*request, nullptr, true, record));
  // A refused or already known task costs no compute: its FLOPs go back.
  if (admitted && (!outcome.ok() || outcome->already_known)) gate_->RefundFlops(*who, flops);
  if (outcome.ok() && !outcome->already_known && gate_ != nullptr && who != nullptr) {
    gate_->TaskAccepted(*who, outcome->task_id.Hex());
    if (who->budgets.max_disk_bytes > 0 && gate_->disk() != nullptr) {
      // The task is stored and acknowledged below; a failure here only loses its charge.
      if (Status s = gate_->disk()->AddTask(who->id, outcome->task_id.Hex(), record_bytes); !s.ok()) {
        Log(LogLevel::kWarn, "could not record the client's disk charge for a task",
            {{"client", who->label}, {"error", s.message()}});
      }
    }
  }
  if (!outcome.ok()) {
    metrics_->tasks_rejected->Increment();
    Log(LogLevel::kInfo, "task rejected",
        {{"code", StatusCodeName(outcome.status().code())}, {"error", outcome.status().message()}});
    return ToGrpcStatus(outcome.status());
  }
  response->set_task_id(outcome->task_id.Hex());
  response->set_already_known(outcome->already_known);
  return grpc::Status::OK;
}

grpc::Status ClientService::GetTaskImpl(const v1::GetTaskRequest* request, v1::Task* response) {
  auto id = consensus::TaskId::FromHex(request->task_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  auto task = tasks_->Get(*id);
  if (!task.ok()) return ToGrpcStatus(task.status());
  *response = std::move(task).value();
  return grpc::Status::OK;
}

namespace {

// A watch follows a certified task until its challenge window closes, so a client sees it
// certified and then final (docs/SECURITY.md).
bool WatchDone(const v1::Task& task) {
  if (!consensus::IsFinal(static_cast<consensus::TaskState>(task.state()))) return false;
  return !(task.has_consensus() && task.consensus().has_certificate() && !task.consensus().final());
}

}  // namespace

grpc::Status ClientService::WatchTaskImpl(grpc::ServerContext* context, const v1::WatchTaskRequest* request,
                                          grpc::ServerWriter<v1::Task>* writer, const ClientIdentity* who) {
  ClientGate::WatchSlot slot;
  if (gate_ != nullptr && who != nullptr) {
    auto opened = gate_->OpenWatch(*who);
    if (!opened.ok()) return ToGrpcStatus(opened.status());
    slot = std::move(opened).value();
  }
  auto id = consensus::TaskId::FromHex(request->task_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  auto task = tasks_->Get(*id);
  if (!task.ok()) return ToGrpcStatus(task.status());
  v1::Task current = std::move(task).value();
  // A watch without a client deadline still ends: the server re-checks the client every wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(24);
  while (true) {
    if (!writer->Write(current)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    if (WatchDone(current)) return grpc::Status::OK;
    v1::Task last = current;
    auto next = tasks_->WaitForChange(*id, last, deadline, [context] { return context->IsCancelled(); });
    if (!next.ok()) return ToGrpcStatus(next.status());
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
    if (!TaskManager::Changed(last, *next)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "watch ended before the task finished");
    }
    current = std::move(next).value();
  }
}

grpc::Status ClientService::GetNodeInfoImpl(grpc::ServerContext*, const v1::GetNodeInfoRequest*,
                                            v1::NodeInfo* response) {
  if (node_info_) node_info_(response);
  response->set_queue_depth(static_cast<uint32_t>(tasks_->queue_depth()));
  response->set_running(static_cast<uint32_t>(tasks_->running()));
  Store::Stats stats = store_->GetStats();
  response->set_blob_count(static_cast<uint64_t>(stats.blob_count));
  response->set_blob_bytes(static_cast<uint64_t>(stats.blob_bytes));
  response->set_task_count(static_cast<uint64_t>(stats.task_count));
  return grpc::Status::OK;
}

grpc::Status ClientService::GetTraceImpl(grpc::ServerContext*, const v1::GetTraceRequest* request,
                                         v1::TraceResponse* response) {
  auto id = consensus::TaskId::FromHex(request->task_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  auto trace = tasks_->RecomputeTrace(*id, request->first_op(), request->max_ops());
  if (!trace.ok()) return ToGrpcStatus(trace.status());
  *response = std::move(trace).value();
  return grpc::Status::OK;
}

grpc::Status ClientService::PutBlob(grpc::ServerContext* context, grpc::ServerReader<v1::PutBlobRequest>* reader,
                                    v1::PutBlobResponse* response) {
  grpc::Status refusal;
  auto who = Authenticate(context, &refusal);
  if (!who) return Count(metrics_, "PutBlob", refusal);
  return Count(metrics_, "PutBlob", PutBlobImpl(context, reader, response, &*who));
}

grpc::Status ClientService::GetBlob(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                                    grpc::ServerWriter<v1::BlobChunk>* writer) {
  grpc::Status refusal;
  auto who = Authenticate(context, &refusal);
  if (!who) return Count(metrics_, "GetBlob", refusal);
  return Count(metrics_, "GetBlob", GetBlobImpl(context, request, writer, &*who));
}

grpc::Status ClientService::WatchTask(grpc::ServerContext* context, const v1::WatchTaskRequest* request,
                                      grpc::ServerWriter<v1::Task>* writer) {
  grpc::Status refusal;
  auto who = Authenticate(context, &refusal);
  if (!who) return Count(metrics_, "WatchTask", refusal);
  return Count(metrics_, "WatchTask", WatchTaskImpl(context, request, writer, &*who));
}

grpc::Status ClientService::GetNodeInfo(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                                        v1::NodeInfo* response) {
  grpc::Status refusal;
  auto who = Authenticate(context, &refusal);
  if (!who) return Count(metrics_, "GetNodeInfo", refusal);
  return Count(metrics_, "GetNodeInfo", GetNodeInfoImpl(context, request, response));
}

grpc::Status ClientService::GetTrace(grpc::ServerContext* context, const v1::GetTraceRequest* request,
                                     v1::TraceResponse* response) {
  grpc::Status refusal;
  auto who = Authenticate(context, &refusal);
  if (!who) return Count(metrics_, "GetTrace", refusal);
  return Count(metrics_, "GetTrace", GetTraceImpl(context, request, response));
}

bool ClientService::OpenPendingCall() {
  if (pending_calls_->fetch_add(1) < max_pending_calls_) return true;
  pending_calls_->fetch_sub(1);
  return false;
}

namespace {
grpc::Status TooManyCalls(int64_t max_pending_calls) {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "the node has " + std::to_string(max_pending_calls) +
                          " client calls open, its cap (16 x rpc.max_streams); try again later");
}
}  // namespace

grpc::ServerUnaryReactor* ClientService::ServeOnWorkers(grpc::CallbackServerContext* context, const char* method,
                                                        std::function<grpc::Status()> serve) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!OpenPendingCall()) {
    reactor->Finish(Count(metrics_, method, TooManyCalls(max_pending_calls_)));
    return reactor;
  }
  NodeMetrics* metrics = metrics_;
  std::shared_ptr<std::atomic<int64_t>> pending = pending_calls_;
  bool posted = workers_->Post([reactor, method, metrics, pending, serve = std::move(serve)] {
    grpc::Status status = Count(metrics, method, serve());
    pending->fetch_sub(1);
    reactor->Finish(status);  // the call's request and response are gone after this
  });
  if (!posted) {
    pending_calls_->fetch_sub(1);
    reactor->Finish(Count(metrics_, method, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node is shutting down")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* ClientService::SubmitTask(grpc::CallbackServerContext* context,
                                                    const v1::SubmitTaskRequest* request,
                                                    v1::SubmitTaskResponse* response) {
  return ServeOnWorkers(context, "SubmitTask", [this, context, request, response] {
    grpc::Status refusal;
    auto who = Authenticate(context, &refusal);
    if (!who) return refusal;
    return SubmitTaskImpl(request, response, &*who);
  });
}

grpc::ServerUnaryReactor* ClientService::GetTask(grpc::CallbackServerContext* context,
                                                 const v1::GetTaskRequest* request, v1::Task* response) {
  return ServeOnWorkers(context, "GetTask", [this, context, request, response] {
    grpc::Status refusal;
    auto who = Authenticate(context, &refusal);
    if (!who) return refusal;
    return GetTaskImpl(request, response);
  });
}

// One RunTask call between gRPC's threads and the call workers. Events (the client's cancel,
// the task's change, the deadline alarm, the node's shutdown) only set a flag and Kick; Drive
// runs one at a time per call, and is the only code that touches the call's request, response
// and reactor, which it stops touching once it has finished the call. Drive runs on the thread
// that kicked it (gRPC's, for the call's start; the task manager's, for a change) while nothing
// it has to do can wait (a sync, a blob read, a compile), and moves to the call workers when
// something can.
struct ClientService::RunTaskState : std::enable_shared_from_this<ClientService::RunTaskState> {
  ClientService* service;
  std::shared_ptr<CallWorkers> workers;
  grpc::CallbackServerContext* context;
  const v1::RunTaskRequest* request;
  v1::RunTaskResponse* response;
  grpc::ServerUnaryReactor* reactor;
  grpc::Alarm* alarm;

  std::mutex mu;
  bool scheduled = false;  // a Drive is posted or running
  bool again = false;      // an event came while Drive ran: it runs once more
  bool finished = false;
  bool cancelled = false;
  bool stopping = false;           // the task manager is shutting down
  bool listening = false;          // a change listener is registered and not yet called
  uint64_t listen_generation = 0;  // tells a stale listener's call from the current one's

  uint64_t listen_handle = 0;  // guarded by mu

  // Drive's own (`id` is set before the first listener and not changed after).
  bool submitted = false;
  consensus::TaskId id;
  v1::Task current;
  std::chrono::steady_clock::time_point deadline;
  ClientGate::WatchSlot slot;

  // What a step needs next.
  struct Blocks {};  // to go on where it may wait: on a call worker
  using StepOutcome = std::variant<std::monostate, grpc::Status, Blocks>;  // monostate: wait for an event

  // `here`: Drive may run on the caller's thread, which must not wait (gRPC's, or the task
  // manager's); it moves to a call worker at the first step that could. Otherwise it is posted.
  void Kick(bool here = false) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (finished) return;
      if (scheduled) {
        again = true;
        return;
      }
      scheduled = true;
    }
    if (here) {
      Drive(/*may_wait=*/false);
    } else {
      PostDrive();
    }
  }

  void PostDrive() {
    if (!workers->Post([self = shared_from_this()] { self->Drive(/*may_wait=*/true); })) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node is shutting down"));
    }
  }

  void Drive(bool may_wait) {
    while (true) {
      bool cancel, stop;
      {
        std::lock_guard<std::mutex> lock(mu);
        again = false;
        cancel = cancelled;
        stop = stopping;
      }
      std::optional<grpc::Status> outcome;
      if (cancel) {
        outcome = grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
      } else if (stop) {
        outcome = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node is shutting down");
      } else {
        StepOutcome step = Step(may_wait);
        if (std::holds_alternative<Blocks>(step)) {
          PostDrive();  // still scheduled: events meanwhile set `again` for that Drive
          return;
        }
        if (auto* status = std::get_if<grpc::Status>(&step)) outcome = *status;
      }
      if (outcome) {
        Finish(*outcome);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!again) {
        scheduled = false;
        return;
      }
    }
  }

  // The call's status when it is done; monostate while it waits for an event; Blocks when the
  // next thing to do may wait and `may_wait` is false (nothing was done towards it).
  StepOutcome Step(bool may_wait) {
    TaskManager* tasks = service->tasks_;
    if (!submitted) {
      grpc::Status refusal;
      auto who = service->Authenticate(context, &refusal);
      if (!who) return refusal;
      const bool without_waiting = service->SubmitsWithoutWaiting(*who, request->task());
      if (!may_wait && !without_waiting) return Blocks{};
      // The wait takes a watch slot, as a watch does, before anything is stored: a client at
      // max_watches is refused without a task left behind.
      if (service->gate_ != nullptr) {
        auto opened = service->gate_->OpenWatch(*who);
        if (!opened.ok()) return ToGrpcStatus(opened.status());
        slot = std::move(opened).value();
      }
      // On a single node the record needs no sync of its own: this call answers only once the
      // task's result is synced, and that sync covers the record (docs/NODE.md, "Client API").
      const Durability record = service->submitter_ ? Durability::kSynced : Durability::kDeferred;
      v1::SubmitTaskResponse accepted;
      if (grpc::Status s = service->SubmitTaskImpl(&request->task(), &accepted, &*who, record); !s.ok()) return s;
      response->set_already_known(accepted.already_known());
      auto parsed = consensus::TaskId::FromHex(accepted.task_id());
      if (!parsed.ok()) return ToGrpcStatus(parsed.status());
      id = *parsed;
      const uint64_t wait_ms =
          request->max_wait_ms() == 0 ? kMaxRunTaskWaitMs : std::min(request->max_wait_ms(), kMaxRunTaskWaitMs);
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
      // A task this call just stored is QUEUED with no attempts (single node; a network entry
      // node's record differs from this and is read at once), so the first read does not
      // answer with it; a known task's state is unknown, and an empty record differs from any.
      if (!accepted.already_known()) current.set_state(v1::TASK_STATE_QUEUED);
      submitted = true;
      alarm->Set(std::chrono::system_clock::now() + std::chrono::milliseconds(wait_ms),
                 [self = shared_from_this()](bool fired) {
                   if (fired) self->Kick();
                 });
    }
    // Listen before reading, so a change after the read is heard.
    EnsureListening();
    // The record as it is, maybe not yet synced: only to see whether the call is done.
    auto seen = tasks->Peek(id);
    if (!seen.ok()) return ToGrpcStatus(seen.status());
    const bool changed = TaskManager::Changed(current, *seen);
    const bool done = changed && consensus::IsFinal(static_cast<consensus::TaskState>(seen->state()));
    if (!done && std::chrono::steady_clock::now() < deadline) {
      current = std::move(seen).value();
      return std::monostate{};
    }
    // Final, or the time is up: the client gets the record as it is, once durable (as GetTask's).
    // With no synced write of the task under way since the read, the read is that record.
    if (tasks->MayWaitForSync(id)) {
      if (!may_wait) return Blocks{};
      seen = tasks->Get(id);
      if (!seen.ok()) return ToGrpcStatus(seen.status());
    }
    // The call ends here: the record goes to the response without a copy.
    *response->mutable_task() = std::move(seen).value();
    return grpc::Status::OK;
  }

  // One listener at a time (a second would outlive the call until the task's next change).
  void EnsureListening() {
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (listening || finished) return;
      listening = true;
      generation = ++listen_generation;
    }
    const uint64_t handle = service->tasks_->ListenForChange(
        id,
        [self = shared_from_this(), generation](bool shutting_down) { self->OnTaskChange(generation, shutting_down); },
        /*after_start=*/true);  // only a final state answers the call
    std::lock_guard<std::mutex> lock(mu);
    if (listen_generation == generation) listen_handle = handle;
  }

  // On the thread that changed the task (or shut the task manager down).
  void OnTaskChange(uint64_t generation, bool shutting_down) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (listen_generation == generation) listening = false;
      if (shutting_down) stopping = true;
    }
    TaskManager* tasks = service->tasks_;
    if (!shutting_down && tasks->ResultAwaitsSync(id)) {
      // A result announced before its sync: the finisher announces it again after the sync, so
      // the call waits for that instead of having a call worker wait for the sync. Checked again
      // after listening, in case the finisher's announcement came in between.
      EnsureListening();
      if (tasks->ResultAwaitsSync(id)) return;
    }
    // On this thread while nothing waits (Drive moves to a call worker if it must).
    Kick(/*here=*/true);
  }

  void Finish(const grpc::Status& status) {
    bool still_listening;
    uint64_t handle;
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
      still_listening = listening;
      handle = listen_handle;
    }
    if (still_listening) service->tasks_->CancelListen(id, handle);
    slot = ClientGate::WatchSlot();  // free before the client hears the answer
    Count(service->metrics_, "RunTask", status);
    reactor->Finish(status);  // the last touch of the call
  }
};

class ClientService::RunTaskCall final : public grpc::ServerUnaryReactor {
 public:
  RunTaskCall(ClientService* service, grpc::CallbackServerContext* context, const v1::RunTaskRequest* request,
              v1::RunTaskResponse* response)
      : pending_(service->pending_calls_), state_(std::make_shared<RunTaskState>()) {
    state_->service = service;
    state_->workers = service->workers_;
    state_->context = context;
    state_->request = request;
    state_->response = response;
    state_->reactor = this;
    state_->alarm = &alarm_;
  }
  // On gRPC's thread: a warm task on a single node is admitted here (SubmitsWithoutWaiting).
  void Start() { state_->Kick(/*here=*/true); }
  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->cancelled = true;
    }
    state_->Kick();
  }
  void OnDone() override {
    pending_->fetch_sub(1);
    delete this;  // the alarm is cancelled; a late listener call holds only the state
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> pending_;
  grpc::Alarm alarm_;
  std::shared_ptr<RunTaskState> state_;
};

grpc::ServerUnaryReactor* ClientService::RunTask(grpc::CallbackServerContext* context,
                                                 const v1::RunTaskRequest* request, v1::RunTaskResponse* response) {
  if (!OpenPendingCall()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(Count(metrics_, "RunTask", TooManyCalls(max_pending_calls_)));
    return reactor;
  }
  auto* call = new RunTaskCall(this, context, request, response);
  call->Start();
  return call;
}

namespace {
grpc::Status NotForPeers(const char* call) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      std::string(call) + " is not served on the peer port; clients use the node's client port");
}

// Who asks: OK with the verified operator ("0x...") in *requester, or "" for an unsigned request
// (or when there is no verifier). A request that claims a signature first takes a token of its
// host's signature-check budget, so the ECDSA recovery is paid only within it; a bad signature
// is UNAUTHENTICATED and a non-operator's PERMISSION_DENIED (an honest peer sends neither).
template <typename Request>
grpc::Status IdentifyRequester(const char* call, const std::string& host, const Request& request,
                               PeerRateBudget* signature_checks, SignedRequestReplays* replays,
                               const std::function<PeerRequestAuth(const Request&)>& verify, std::string* requester) {
  requester->clear();
  if (!verify || !ClaimsSignature(request)) return grpc::Status::OK;
  if (signature_checks != nullptr) {
    if (Status room = signature_checks->Take(call, host, ""); !room.ok()) return ToGrpcStatus(room);
  }
  PeerRequestAuth auth = verify(request);
  switch (auth.outcome) {
    case PeerRequestAuth::Outcome::kUnsigned: return grpc::Status::OK;
    case PeerRequestAuth::Outcome::kOperator: {
      if (replays != nullptr) {
        Status fresh = replays->Admit(call, auth.requester, auth.digest, auth.sent_unix_ms, UnixMillisNow());
        if (!fresh.ok()) return ToGrpcStatus(fresh);
      }
      *requester = AddressToHex(auth.requester);
      return grpc::Status::OK;
    }
    case PeerRequestAuth::Outcome::kBadSignature: return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, auth.error);
    case PeerRequestAuth::Outcome::kNotAnOperator: return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, auth.error);
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, "unknown signature outcome");
}

// Takes one call of `call` from the lookups budget (none: OK).
grpc::Status TakeLookup(PeerRateBudget* lookups, const char* call, const std::string& host,
                        const std::string& requester) {
  if (lookups == nullptr) return grpc::Status::OK;
  return ToGrpcStatus(lookups->Take(call, host, requester));
}
}  // namespace

grpc::Status PeerFacingClientService::PutBlob(grpc::ServerContext*, grpc::ServerReader<v1::PutBlobRequest>*,
                                              v1::PutBlobResponse*) {
  return NotForPeers("PutBlob");
}
grpc::Status PeerFacingClientService::GetBlob(grpc::ServerContext* context, const v1::GetBlobRequest* request,
                                              grpc::ServerWriter<v1::BlobChunk>* writer) {
  StreamBudget::Slot slot;  // held until the stream ends
  if (streams_ != nullptr) {
    // A signed request counts against its operator's budget; a bad signature is refused rather
    // than counted as unsigned (an honest peer never sends one).
    const std::string host = PeerAddress(context->peer());
    std::string requester;
    if (grpc::Status who = IdentifyRequester("GetBlob", host, *request, guards_.signature_checks, guards_.replays,
                                             verify_, &requester);
        !who.ok()) {
      return Count(client_->metrics_, "GetBlob", who);
    }
    auto opened = streams_->Open(host, requester);
    if (!opened.ok()) return Count(client_->metrics_, "GetBlob", ToGrpcStatus(opened.status()));
    slot = std::move(opened).value();
  }
  return Count(client_->metrics_, "GetBlob", client_->GetBlobImpl(context, request, writer, /*who=*/nullptr));
}
grpc::Status PeerFacingClientService::SubmitTask(grpc::ServerContext*, const v1::SubmitTaskRequest*,
                                                 v1::SubmitTaskResponse*) {
  return NotForPeers("SubmitTask");
}
grpc::Status PeerFacingClientService::GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request,
                                              v1::Task* response) {
  if (client_->refuse_peers_) {
    return Count(client_->metrics_, "GetTask",
                 grpc::Status(grpc::StatusCode::UNAVAILABLE, "fault injection: GetTask refused"));
  }
  const std::string host = PeerAddress(context->peer());
  std::string requester;
  if (grpc::Status who = IdentifyRequester("GetTask", host, *request, guards_.signature_checks, guards_.replays,
                                           guards_.verify_task, &requester);
      !who.ok()) {
    return Count(client_->metrics_, "GetTask", who);
  }
  if (grpc::Status room = TakeLookup(guards_.lookups, "GetTask", host, requester); !room.ok()) {
    return Count(client_->metrics_, "GetTask", room);
  }
  return Count(client_->metrics_, "GetTask", client_->GetTaskImpl(request, response));
}
grpc::Status PeerFacingClientService::WatchTask(grpc::ServerContext*, const v1::WatchTaskRequest*,
                                                grpc::ServerWriter<v1::Task>*) {
  return NotForPeers("WatchTask");
}
grpc::Status PeerFacingClientService::RunTask(grpc::ServerContext*, const v1::RunTaskRequest*, v1::RunTaskResponse*) {
  return NotForPeers("RunTask");
}
grpc::Status PeerFacingClientService::GetNodeInfo(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                                                  v1::NodeInfo* response) {
  const std::string host = PeerAddress(context->peer());
  std::string requester;
  if (grpc::Status who = IdentifyRequester("GetNodeInfo", host, *request, guards_.signature_checks, guards_.replays,
                                           guards_.verify_node_info, &requester);
      !who.ok()) {
    return Count(client_->metrics_, "GetNodeInfo", who);
  }
  if (grpc::Status room = TakeLookup(guards_.lookups, "GetNodeInfo", host, requester); !room.ok()) {
    return Count(client_->metrics_, "GetNodeInfo", room);
  }
  return Count(client_->metrics_, "GetNodeInfo", client_->GetNodeInfoImpl(context, request, response));
}

grpc::Status PeerFacingClientService::GetTrace(grpc::ServerContext*, const v1::GetTraceRequest*, v1::TraceResponse*) {
  // A whole re-execution: for clients, on the client port, one at a time.
  return NotForPeers("GetTrace");
}

}  // namespace consensor::node
