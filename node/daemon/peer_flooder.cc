#include "node/daemon/peer_flooder.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <random>

#include "common/sha256.h"
#include "consensor/v1/node.grpc.pb.h"
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

void Close(HeldStream& s) {
  s.context->TryCancel();
  (void)s.reader->Finish();
}

}  // namespace

PeerFlooder::PeerFlooder(PeerFlooderOptions options, std::function<std::vector<std::string>()> peers,
                         std::function<std::vector<std::string>()> blobs,
                         std::function<Status(v1::GetBlobRequest*)> sign)
    : options_(options), peers_(std::move(peers)), blobs_(std::move(blobs)), sign_(std::move(sign)) {}

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
  std::vector<HeldStream> held;
  int64_t opened = 0, calls = 0, refused_calls = 0;
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
    for (const std::string& endpoint : peers) {
      auto& stub = stubs[endpoint];
      if (!stub) stub = v1::Client::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
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
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        v1::GetTaskRequest request;
        request.set_task_id(RandomHex(rng));
        v1::Task task;
        ++calls;
        if (!stub->GetTask(&context, request, &task).ok()) ++refused_calls;
      }
    }
    if (now - last_report > std::chrono::seconds(5)) {
      last_report = now;
      Log(LogLevel::kWarn, "fault injection: flooding peers",
          {{"peers", static_cast<int64_t>(peers.size())},
           {"blob_streams_opened", opened},
           {"blob_streams_held", static_cast<int64_t>(held.size())},
           {"task_calls", calls},
           {"task_calls_refused", refused_calls}});
    }
  }
  for (HeldStream& s : held) Close(s);
}

}  // namespace consensor::node
