#include "node/daemon/peer_flooder.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <random>

#include "common/sha256.h"
#include "consensor/v1/node.grpc.pb.h"
#include "consensor/v1/peer.grpc.pb.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

struct HeldStream {
  std::string endpoint;
  std::chrono::steady_clock::time_point opened;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader;
};

std::string RandomHex(std::mt19937_64& rng) {
  std::array<uint8_t, 32> bytes{};
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return ToHex(bytes);
}

// A round's unary calls, sent to every peer at once (gRPC's callback API) and waited for
// together, so the flood's rate does not shrink to one call per round trip.
class RoundCalls {
 public:
  template <typename Request, typename Response>
  struct Call {
    Call() { context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1)); }
    grpc::ClientContext context;
    Request request;
    Response response;
  };
  // A call kept alive until Wait() returns.
  template <typename Request, typename Response>
  Call<Request, Response>* Add() {
    auto call = std::make_shared<Call<Request, Response>>();
    keep_.push_back(call);
    return call.get();
  }
  // Called just before a call is started: Wait() then waits for its Done.
  void Sending() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
  }
  void Done(const grpc::Status& status, int64_t RoundCalls::*refused) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok()) ++(this->*refused);
    --pending_;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return pending_ <= 0; });
  }
  int64_t refused_tasks = 0, refused_pulls = 0, refused_info = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
  std::vector<std::shared_ptr<void>> keep_;
};

void Close(HeldStream& s) {
  s.context->TryCancel();
  (void)s.reader->Finish();
}

}  // namespace

PeerFlooder::PeerFlooder(PeerFlooderOptions options, std::function<std::vector<std::string>()> peers,
                         std::function<std::vector<std::string>()> blobs,
                         std::function<Status(v1::GetBlobRequest*)> sign, PeerFlooderSigners signers)
    : options_(options),
      peers_(std::move(peers)),
      blobs_(std::move(blobs)),
      sign_(std::move(sign)),
      signers_(std::move(signers)) {}

PeerFlooder::~PeerFlooder() { Stop(); }

void PeerFlooder::Start() {
  thread_ = std::thread([this] { Run(); });
}

void PeerFlooder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerFlooder::Run() {
  std::mt19937_64 rng(std::random_device{}());
  std::map<std::string, std::unique_ptr<v1::Client::Stub>> stubs;
  std::map<std::string, std::unique_ptr<v1::Peer::Stub>> peer_stubs;
  std::vector<HeldStream> held;
  int64_t opened = 0, calls = 0, refused_calls = 0, pulls = 0, refused_pulls = 0, info_calls = 0,
          refused_info_calls = 0;
  auto last_report = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, options_.round, [this] { return stop_; })) break;
    }
    const auto now = std::chrono::steady_clock::now();
    // Streams held long enough are dropped and opened again: a fresh claim on the peer's budget.
    for (auto it = held.begin(); it != held.end();) {
      if (now - it->opened < options_.hold) {
        ++it;
        continue;
      }
      Close(*it);
      it = held.erase(it);
    }
    const std::vector<std::string> peers = peers_();
    const std::vector<std::string> blobs = blobs_();
    RoundCalls round;
    for (const std::string& endpoint : peers) {
      auto& stub = stubs[endpoint];
      if (!stub) {
        auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
        stub = v1::Client::NewStub(channel);
        peer_stubs[endpoint] = v1::Peer::NewStub(channel);
      }
      v1::Peer::Stub& peer_stub = *peer_stubs[endpoint];
      int open_here = 0;
      for (const HeldStream& s : held) open_here += s.endpoint == endpoint ? 1 : 0;
      for (int i = open_here; i < options_.streams_per_peer; ++i) {
        v1::GetBlobRequest request;
        request.set_sha256(blobs.empty() ? RandomHex(rng) : blobs[rng() % blobs.size()]);
        if (!sign_(&request).ok()) continue;
        HeldStream s;
        s.endpoint = endpoint;
        s.opened = now;
        s.context = std::make_unique<grpc::ClientContext>();
        s.context->set_deadline(std::chrono::system_clock::now() + options_.hold * 2);
        s.reader = stub->GetBlob(s.context.get(), request);  // never read
        held.push_back(std::move(s));
        ++opened;
      }
      for (int i = 0; i < options_.calls_per_round; ++i) {
        auto call = round.Add<v1::GetTaskRequest, v1::Task>();
        call->request.set_task_id(RandomHex(rng));
        if (signers_.task && !signers_.task(&call->request).ok()) continue;
        ++calls;
        round.Sending();
        stub->async()->GetTask(&call->context, &call->request, &call->response,
                               [&round](grpc::Status s) { round.Done(s, &RoundCalls::refused_tasks); });
      }
      for (int i = 0; i < options_.pulls_per_round; ++i) {
        auto call = round.Add<v1::PullRequest, v1::PullResponse>();
        call->request.set_max_messages(64);  // epoch 0, cursor 0: from the start of the peer's log
        if (signers_.pull && !signers_.pull(&call->request).ok()) continue;
        ++pulls;
        round.Sending();
        peer_stub.async()->Pull(&call->context, &call->request, &call->response,
                                [&round](grpc::Status s) { round.Done(s, &RoundCalls::refused_pulls); });
      }
      for (int i = 0; i < options_.info_calls_per_round; ++i) {
        auto call = round.Add<v1::GetNodeInfoRequest, v1::NodeInfo>();
        if (signers_.node_info && !signers_.node_info(&call->request).ok()) continue;
        ++info_calls;
        round.Sending();
        stub->async()->GetNodeInfo(&call->context, &call->request, &call->response,
                                   [&round](grpc::Status s) { round.Done(s, &RoundCalls::refused_info); });
      }
    }
    round.Wait();  // every call has a 1 s deadline
    refused_calls += round.refused_tasks;
    refused_pulls += round.refused_pulls;
    refused_info_calls += round.refused_info;
    if (now - last_report > std::chrono::seconds(5)) {
      last_report = now;
      Log(LogLevel::kWarn, "fault injection: flooding peers",
          {{"peers", static_cast<int64_t>(peers.size())},
           {"blob_streams_opened", opened},
           {"blob_streams_held", static_cast<int64_t>(held.size())},
           {"task_calls", calls},
           {"task_calls_refused", refused_calls},
           {"pulls", pulls},
           {"pulls_refused", refused_pulls},
           {"node_info_calls", info_calls},
           {"node_info_calls_refused", refused_info_calls}});
    }
  }
  for (HeldStream& s : held) Close(s);
}

}  // namespace consensor::node
