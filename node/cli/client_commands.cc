#include "node/cli/client_commands.h"

#include "node/api/api_key.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "common/clock.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "common/sha256.h"
#include "consensus/replication.h"
#include "consensus/task.h"
#include "executor/merkle.h"
#include "executor/serialize.h"
#include "node/api/client.h"
#include "node/api/task_spec.h"
#include "node/cli/model_file.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int64_t kMaxUploadBytes = int64_t{4} << 30;
constexpr int64_t kMaxTraceOpsPerResponse = 4096;  // the node's limit (GetTraceRequest.max_ops)

int Fail(std::ostream& err, const Status& s) {
  err << "error: " << s.message() << "\n";
  return kExitFailure;
}

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n(see `consensor --help`)\n";
  return kExitUsage;
}

std::string StateName(v1::TaskState s) {
  switch (s) {
    case v1::TASK_STATE_QUEUED: return "queued";
    case v1::TASK_STATE_RUNNING: return "running";
    case v1::TASK_STATE_SUCCEEDED: return "succeeded";
    case v1::TASK_STATE_FAILED: return "failed";
    case v1::TASK_STATE_CERTIFYING: return "certifying";
    default: return "unknown";
  }
}

bool IsFinal(const v1::Task& t) { return t.state() == v1::TASK_STATE_SUCCEEDED || t.state() == v1::TASK_STATE_FAILED; }

std::string OutputType(const v1::TaskOutput& o) {
  Shape shape(o.shape().begin(), o.shape().end());
  return std::string(DTypeName(static_cast<DType>(o.dtype()))) + ShapeToString(shape);
}

// Output names are free text; keep file names safe.
std::string SafeFileName(const std::string& name) {
  std::string file = name;
  for (char& c : file) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  if (file.empty() || file == "." || file == "..") file = "_" + file;
  return file;
}

void PrintTask(const v1::Task& t, std::ostream& out) {
  out << "task     " << t.task_id() << "\n";
  out << "state    " << StateName(t.state());
  if (t.attempts() > 1) out << " (attempt " << t.attempts() << ")";
  out << "\n";
  if (t.state() == v1::TASK_STATE_FAILED) out << "error    " << t.error_code() << ": " << t.error_message() << "\n";
  if (t.state() == v1::TASK_STATE_SUCCEEDED) {
    const v1::TaskResult& r = t.result();
    out << "graph    " << r.graph_id() << "\n";
    out << "backend  " << r.backend() << "\n";
    for (const auto& o : r.outputs()) {
      out << "output   " << o.name() << " " << OutputType(o) << " sha256:" << o.tensor_hash() << "\n";
    }
    out << "result   " << r.result_root() << "\n";
    // Tasks run without the trace since protocol version 3; `consensor trace` recomputes it.
    if (r.trace_ops() == 0 && r.trace_root() == ToHex(consensus::kDeferredTraceRoot)) {
      out << "trace    not computed (`consensor trace " << t.task_id() << "` recomputes it)\n";
    } else {
      out << "trace    " << r.trace_root() << " (" << r.trace_ops() << " ops)\n";
    }
    out << "seconds  " << std::fixed << std::setprecision(6) << r.execution_seconds() << "\n";
  }
  if (t.has_consensus()) {
    const v1::TaskConsensus& c = t.consensus();
    out << "committee " << c.committee_size() << " of the order at block " << c.reference_block() << ", quorum "
        << c.quorum() << " (" << (c.member() ? "this node is a member" : "this node observes") << "), "
        << c.attestations_size() << " attestations\n";
    if (c.has_certificate()) {
      const v1::Certificate& cert = c.certificate();
      out << "certified " << cert.result_root() << " by " << cert.signers_size()
          << (cert.dispute() ? " signers (dispute certificate)" : " signers") << "\n";
      // Certified is not final: evidence may still overturn it until the window closes.
      if (c.final()) {
        out << "final    challenge window closed after block " << c.final_block() << "\n";
      } else {
        out << "final    not yet: challenge window open until block " << c.final_block() << "\n";
      }
      for (const auto& s : cert.signers()) out << "  signer " << s << "\n";
    }
    if (c.disputed())
      out << "disputed conflicting results were signed; dispute committee of " << c.dispute_committee_size() << "\n";
    for (const auto& s : c.slashes()) {
      out << "slash    " << s.kind() << " " << s.operator_address() << " "
          << (s.tx_hash().empty() ? "not sent: " + s.error() : "tx " + s.tx_hash()) << "\n";
    }
  }
}

Status DownloadOutputs(NodeClient& client, const v1::Task& task, const std::string& expected_task_id,
                       const std::string& dir, std::ostream& out) {
  RETURN_IF_ERROR(CheckTaskAgainstCertificate(task, expected_task_id));
  RETURN_IF_ERROR(consensor::CreateDirectories(dir));
  std::set<std::string> used;
  for (const auto& o : task.result().outputs()) {
    ASSIGN_OR_RETURN(auto bytes, client.GetBlob(o.blob_sha256(), kMaxUploadBytes));
    // Check the tensor itself against the hash the node reported (and would sign).
    NpyLimits limits;
    limits.max_bytes = kMaxUploadBytes;
    RETURN_IF_ERROR(
        CheckNpyTensorHash(bytes, o.tensor_hash(), limits).WithContext("output '" + o.name() + "' from the node"));
    std::string file = SafeFileName(o.name());
    while (!used.insert(file).second) file += "_";
    const std::string path = dir + "/" + file + ".npy";
    RETURN_IF_ERROR(consensor::WriteFileAtomic(path, bytes));
    out << "wrote    " << path << "\n";
  }
  return OkStatus();
}

// Proto field names, as a script reading the output would expect.
std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}\n";
  return json;
}

StatusOr<std::chrono::milliseconds> Timeout(const ParsedArgs& a) {
  if (auto t = a.Option("--timeout")) {
    ASSIGN_OR_RETURN(int64_t s, ParseIntOption(*t, "--timeout", 1, 7 * 24 * 3600));
    return std::chrono::milliseconds(s * 1000);
  }
  return std::chrono::milliseconds(3600 * 1000);
}

}  // namespace

Status CheckTaskAgainstCertificate(const v1::Task& task, const std::string& expected_task_id) {
  ASSIGN_OR_RETURN(consensus::TaskId id, TaskIdOfRequest(task.spec()));
  if (id.Hex() != expected_task_id) {
    return DataLoss("the node's task " + expected_task_id + " has a request whose id is " + id.Hex() +
                    ": its record does not belong to the task");
  }
  std::vector<std::pair<std::string, Hash256>> outputs;
  for (const auto& o : task.result().outputs()) {
    ASSIGN_OR_RETURN(Hash256 h, HashFieldFromHex(o.tensor_hash(), "output '" + o.name() + "' tensor_hash"));
    outputs.emplace_back(o.name(), h);
  }
  const std::string root = ToHex(executor::ResultRoot(std::move(outputs)));
  if (root != task.result().result_root()) {
    return DataLoss("the outputs hash to result root " + root + ", but the node reports " +
                    task.result().result_root());
  }
  if (task.has_consensus() && task.consensus().has_certificate()) {
    const v1::Certificate& c = task.consensus().certificate();
    ASSIGN_OR_RETURN(Hash256 certified, HashFieldFromHex(c.result_root(), "the certificate's result_root"));
    ASSIGN_OR_RETURN(Hash256 certified_task, HashFieldFromHex(c.task_id(), "the certificate's task_id"));
    if (ToHex(certified_task) != id.Hex()) {
      return DataLoss("the node's certificate is for task " + ToHex(certified_task) + ", not " + id.Hex());
    }
    if (ToHex(certified) != root) {
      return DataLoss("the node serves outputs with result root " + root + ", but the certificate certifies " +
                      ToHex(certified) + ": these are not the certified outputs");
    }
  }
  return OkStatus();
}

namespace {

// A networked node's defaults fill what the user left open; the user sees them in the task
// id's inputs (and can pin them with --replicas/--quorum). A standalone node has no committee,
// and the id covers 0 for both.
Status ResolveReplication(NodeClient& client, v1::TaskOptions* options) {
  if (options->replicas() != 0 && options->quorum() != 0) return OkStatus();
  auto info = client.GetNodeInfo();
  if (!info.ok()) return info.status().WithContext("reading the node's default replication");
  if (!info->has_consensus()) return OkStatus();
  const v1::ConsensusInfo& c = info->consensus();
  if (options->replicas() == 0) options->set_replicas(c.default_replicas());
  if (options->quorum() == 0) {
    options->set_quorum(consensus::DefaultQuorum(options->replicas(), c.default_replicas(), c.default_quorum()));
  }
  return OkStatus();
}

}  // namespace

std::string NodeAddress(const ParsedArgs& a) {
  if (auto n = a.Option("--node")) return *n;
  if (const char* env = std::getenv("CONSENSOR_NODE"); env && *env) return env;
  return "127.0.0.1:7400";
}

StatusOr<NodeClient> ConnectNode(const ParsedArgs& a, std::chrono::milliseconds call_timeout) {
  auto key = ReadApiKey(a.Option("--api-key-file").value_or(""));
  if (!key.ok()) return key.status();
  NodeClient client(NodeAddress(a), call_timeout);
  client.SetApiKey(*key);
  return client;
}

int CmdSubmit(const ParsedArgs& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "submit takes exactly one GRAPH argument");
  v1::SubmitTaskRequest request;
  if (auto n = a.Option("--nonce")) {
    auto v = ParseIntOption(*n, "--nonce", 0, INT64_MAX);
    if (!v.ok()) return Usage(err, v.status().message());
    request.mutable_options()->set_nonce(static_cast<uint64_t>(*v));
  }
  for (const char* flag : {"--replicas", "--quorum"}) {
    if (auto n = a.Option(flag)) {
      auto v = ParseIntOption(*n, flag, 1, 256);
      if (!v.ok()) return Usage(err, v.status().message());
      if (std::string(flag) == "--replicas") request.mutable_options()->set_replicas(static_cast<uint32_t>(*v));
      else request.mutable_options()->set_quorum(static_cast<uint32_t>(*v));
    }
  }
  if (auto n = a.Option("--max-wall-ms")) {
    auto v = ParseIntOption(*n, "--max-wall-ms", 1, INT64_MAX);
    if (!v.ok()) return Usage(err, v.status().message());
    request.mutable_options()->set_max_wall_ms(static_cast<uint64_t>(*v));
  }
  auto timeout = Timeout(a);
  if (!timeout.ok()) return Usage(err, timeout.status().message());
  if (a.Option("--out") && !a.HasFlag("--wait")) return Usage(err, "--out needs --wait");
  auto parsed_inputs = ParseNamedFiles(a.All("--input"), "--input");
  if (!parsed_inputs.ok()) return Usage(err, parsed_inputs.status().message());
  const std::map<std::string, std::string>& input_files = *parsed_inputs;

  // An ONNX model is imported here, with the shapes of the inputs it will be fed.
  std::map<std::string, Shape> shapes;
  if (Status s = ParseShapeSpecs(a.All("--shape"), &shapes); !s.ok()) return Usage(err, s.message());
  if (executor::IsOnnxPath(a.positional[0])) {
    auto tensors = ReadNpyFiles(input_files, NpyLimits{});
    if (!tensors.ok()) return Fail(err, tensors.status());
    for (const auto& [name, t] : *tensors) shapes.emplace(name, t.shape());
  }
  // The graph is uploaded in its canonical binary form, whatever the file's format.
  executor::Limits limits;
  auto model = LoadModelFile(a.positional[0], shapes, limits);
  if (!model.ok()) return Fail(err, model.status().WithContext("graph '" + a.positional[0] + "'"));
  const executor::Graph* graph = &model->graph;
  auto connected = ConnectNode(a);
  if (!connected.ok()) return Fail(err, connected.status());
  NodeClient& client = *connected;
  auto graph_blob = client.PutBlob(executor::SerializeGraph(*graph));
  if (!graph_blob.ok()) return Fail(err, graph_blob.status().WithContext("uploading the graph"));
  request.set_graph_sha256(graph_blob->sha256());

  // Weights stored as blobs travel too: an imported model's from memory, otherwise from
  // --blobs DIR (files named by their hash). Several constants may share one blob.
  std::set<Hash256> uploaded;
  for (const auto& v : graph->values()) {
    if (!v.blob || !uploaded.insert(v.blob->sha256).second) continue;
    if (model->onnx_blobs) {
      auto bytes = model->onnx_blobs->Get(v.blob->sha256);
      if (!bytes.ok()) return Fail(err, bytes.status());
      auto put = client.PutBlob(*bytes);
      if (!put.ok()) return Fail(err, put.status().WithContext("uploading the model's weights"));
      continue;
    }
    auto dir = a.Option("--blobs");
    if (!dir) return Usage(err, "the graph references weight blobs; give their directory with --blobs DIR");
    const std::string hex = ToHex(v.blob->sha256);
    auto put = client.PutBlobFile(*dir + "/" + hex, kMaxUploadBytes);
    if (!put.ok()) return Fail(err, put.status().WithContext("uploading weights blob " + hex));
    if (put->sha256() != hex) return Fail(err, DataLoss("file " + *dir + "/" + hex + " does not match its name"));
  }
  for (const auto& [name, file] : input_files) {
    auto put = client.PutBlobFile(file, kMaxUploadBytes);
    if (!put.ok()) return Fail(err, put.status().WithContext("input '" + name + "' from '" + file + "'"));
    (*request.mutable_inputs())[name] = put->sha256();
  }
  // Everything the task id covers is fixed here, by the client, and the id the node returns is
  // checked against it: an entry node that changed the request (fewer replicas, a smaller
  // quorum) would return another id, and certificates for that id say nothing about this task.
  request.mutable_options()->set_protocol_version(consensus::kProtocolVersion);
  if (Status s = ResolveReplication(client, request.mutable_options()); !s.ok()) return Fail(err, s);
  auto expected_id = TaskIdOfRequest(request);
  if (!expected_id.ok()) return Fail(err, expected_id.status());
  if (auto file = a.Option("--request-out")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(request, &json, options);
    if (Status s = WriteFileAtomic(
            *file, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(json.data()), json.size()));
        !s.ok())
      return Fail(err, s.WithContext("--request-out"));
  }
  // Before the request leaves: `consensor verify --submitted-at` checks that the committee's
  // seed block came after this moment.
  const int64_t submitted_at = UnixMillisNow() / 1000;
  const auto started = std::chrono::steady_clock::now();
  // --wait ends when the task is certified (or done); --final waits out the challenge window.
  const bool wait_final = a.HasFlag("--final");
  // Without --final, --wait submits and waits in one call (RunTask); a task still unfinished
  // when the node's wait ends is then watched for the rest of --timeout.
  std::optional<v1::RunTaskResponse> ran;
  v1::SubmitTaskResponse submitted;
  if (a.HasFlag("--wait") && !wait_final) {
    auto r = client.RunTask(request, *timeout);
    if (!r.ok()) return Fail(err, r.status());
    submitted.set_task_id(r->task().task_id());
    submitted.set_already_known(r->already_known());
    ran = std::move(r).value();
  } else {
    auto r = client.SubmitTask(request);
    if (!r.ok()) return Fail(err, r.status());
    submitted = std::move(r).value();
  }
  if (submitted.task_id() != expected_id->Hex()) {
    return Fail(err, FailedPrecondition("node " + client.address() + " answered with task id " + submitted.task_id() +
                                        ", but this request's id is " + expected_id->Hex() +
                                        ": the node changed what was asked for; do not trust its results"));
  }
  out << "task     " << submitted.task_id() << (submitted.already_known() ? " (already known)" : "") << "\n";
  out << "submitted " << submitted_at << " (unix seconds; for consensor verify --submitted-at)\n";
  if (!a.HasFlag("--wait")) return kExitOk;

  v1::TaskState last_state = v1::TASK_STATE_UNSPECIFIED;
  uint32_t last_attempts = 0;
  bool said_final = false;
  auto report = [&](const v1::Task& t) {
    if (t.consensus().final() && !said_final) {
      said_final = true;
      err << "  final\n";
    }
    if (t.state() == last_state && t.attempts() == last_attempts) return;
    last_state = t.state();
    last_attempts = t.attempts();
    err << "  " << (t.consensus().has_certificate() ? "certified" : StateName(t.state()));
    if (t.state() == v1::TASK_STATE_RUNNING && t.attempts() > 1) err << " (attempt " << t.attempts() << ")";
    err << "\n";
  };
  StatusOr<v1::Task> task = Internal("no task");
  if (ran && consensus::IsFinal(static_cast<consensus::TaskState>(ran->task().state()))) {
    report(ran->task());
    task = ran->task();
  } else {
    const auto left = std::max(
        std::chrono::milliseconds(1),
        *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started));
    task = client.WatchTask(submitted.task_id(), left, report,
                            [&](const v1::Task& t) { return !wait_final && t.state() == v1::TASK_STATE_SUCCEEDED; });
  }
  if (!task.ok()) return Fail(err, task.status().WithContext("waiting for task " + submitted.task_id()));
  PrintTask(*task, out);
  if (task->state() != v1::TASK_STATE_SUCCEEDED) return kExitFailure;
  if (auto dir = a.Option("--out")) {
    if (Status s = DownloadOutputs(client, *task, expected_id->Hex(), *dir, out); !s.ok()) return Fail(err, s);
  }
  return kExitOk;
}

int CmdStatus(const ParsedArgs& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "status takes exactly one TASK_ID argument");
  auto connected = ConnectNode(a);
  if (!connected.ok()) return Fail(err, connected.status());
  NodeClient& client = *connected;
  auto task = client.GetTask(a.positional[0]);
  if (!task.ok()) return Fail(err, task.status());
  if (a.HasFlag("--json")) {
    out << ToJson(*task);
    return kExitOk;
  }
  PrintTask(*task, out);
  return kExitOk;
}

int CmdTrace(const ParsedArgs& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "trace takes exactly one TASK_ID argument");
  auto asked = consensus::TaskId::FromHex(a.positional[0]);
  if (!asked.ok()) return Usage(err, asked.status().message());
  uint32_t first = 0, count = 0;
  if (auto v = a.Option("--from")) {
    auto n = ParseIntOption(*v, "--from", 0, UINT32_MAX);
    if (!n.ok()) return Usage(err, n.status().message());
    first = static_cast<uint32_t>(*n);
  }
  if (auto v = a.Option("--count")) {
    auto n = ParseIntOption(*v, "--count", 0, kMaxTraceOpsPerResponse);
    if (!n.ok()) return Usage(err, n.status().message());
    count = static_cast<uint32_t>(*n);
  }
  auto timeout = Timeout(a);
  if (!timeout.ok()) return Usage(err, timeout.status().message());
  auto connected = ConnectNode(a, *timeout);
  if (!connected.ok()) return Fail(err, connected.status());
  NodeClient& client = *connected;
  auto task = client.GetTask(asked->Hex());
  if (!task.ok()) return Fail(err, task.status());
  auto trace = client.GetTrace(asked->Hex(), first, count);
  if (!trace.ok()) return Fail(err, trace.status());
  // The node re-executed the task: its result must be the one the certificate's signers signed.
  if (task->has_consensus() && task->consensus().has_certificate() &&
      task->consensus().certificate().result_root() != trace->result_root()) {
    return Fail(err, DataLoss("the recomputed result root " + trace->result_root() + " is not the certified one " +
                              task->consensus().certificate().result_root()));
  }
  if (a.HasFlag("--json")) {
    out << ToJson(*trace);
    return kExitOk;
  }
  out << "task     " << trace->task_id() << "\n";
  out << "result   " << trace->result_root() << "\n";
  out << "trace    " << trace->trace_root() << " (" << trace->trace_ops() << " ops)\n";
  out << "backend  " << trace->backend() << "\n";
  out << "seconds  " << std::fixed << std::setprecision(6) << trace->execution_seconds() << "\n";
  for (int i = 0; i < trace->op_hashes_size(); ++i) {
    out << "op " << (trace->first_op() + static_cast<uint32_t>(i)) << "\t" << trace->op_hashes(i) << "\n";
  }
  return kExitOk;
}

int CmdResult(const ParsedArgs& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "result takes exactly one TASK_ID argument");
  auto dir = a.Option("--out");
  if (!dir) return Usage(err, "result needs --out DIR");
  auto connected = ConnectNode(a);
  if (!connected.ok()) return Fail(err, connected.status());
  NodeClient& client = *connected;
  auto task = client.GetTask(a.positional[0]);
  if (!task.ok()) return Fail(err, task.status());
  if (task->state() == v1::TASK_STATE_FAILED) {
    return Fail(err, FailedPrecondition("task failed: " + task->error_code() + ": " + task->error_message()));
  }
  if (!IsFinal(*task)) return Fail(err, FailedPrecondition("task is " + StateName(task->state()) + "; no result yet"));
  PrintTask(*task, out);
  auto asked = consensus::TaskId::FromHex(a.positional[0]);
  if (!asked.ok()) return Fail(err, asked.status());
  if (Status s = DownloadOutputs(client, *task, asked->Hex(), *dir, out); !s.ok()) return Fail(err, s);
  return kExitOk;
}

int CmdNode(const ParsedArgs& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1 || a.positional[0] != "info")
    return Usage(err, "usage: consensor node info [--node ADDR]");
  auto connected = ConnectNode(a);
  if (!connected.ok()) return Fail(err, connected.status());
  NodeClient& client = *connected;
  auto info = client.GetNodeInfo();
  if (!info.ok()) return Fail(err, info.status());
  if (a.HasFlag("--json")) {
    out << ToJson(*info);
    return kExitOk;
  }
  const auto& l = info->limits();
  out << "node       " << client.address() << "\n";
  out << "version    " << info->version() << "\n";
  out << "operator   " << (info->operator_address().empty() ? "(none)" : info->operator_address()) << "\n";
  out << "backend    " << info->backend() << ", " << info->workers() << " workers\n";
  if (!info->backend_device().empty()) out << "device     " << info->backend_device() << "\n";
  out << "queue      " << info->queue_depth() << " waiting / " << info->queue_capacity() << ", " << info->running()
      << " running\n";
  out << "store      " << info->blob_count() << " blobs (" << info->blob_bytes() << " bytes), " << info->task_count()
      << " tasks\n";
  out << "limits     blob " << l.max_blob_bytes() << " B, task memory " << l.max_task_bytes() << " B, flops "
      << l.max_task_flops() << ", wall " << l.max_task_seconds() << " s, inputs " << l.max_inputs() << "\n";
  if (info->has_consensus()) {
    const auto& c = info->consensus();
    out << "network    chain " << c.chain_id() << " head " << c.chain_head() << ", manager " << c.service_manager()
        << "\n";
    out << "operators  " << c.operator_count() << " active"
        << (c.registered() ? " (this node is one)" : " (this node is NOT registered)") << ", " << c.peers()
        << " peers connected\n";
    out << "consensus  " << c.default_replicas() << " replicas, quorum " << c.default_quorum() << " by default (max "
        << c.max_replicas() << ")\n";
  } else {
    out << "network    standalone (no chain configured)\n";
  }
  return kExitOk;
}

}  // namespace consensor::node
