#!/usr/bin/env bash
# A local Consensor network on loopback: anvil, the AVS contracts, and N operator nodes, each
# with its own key, keystore, datadir, ports and on-chain registration.
#
#   scripts/devnet.sh up [N]          start (default N=4); builds first when needed
#   scripts/devnet.sh status          chain, nodes, peers
#   scripts/devnet.sh submit-example  runs examples/mlp.cgraph on the network, prints the
#                                     certified result and verifies the certificate on-chain
#   scripts/devnet.sh submit MODEL [consensor submit options]
#                                     the same for any graph or ONNX model (.onnx), e.g.
#                                     submit model.onnx --input x=x.npy --replicas 3 --quorum 2
#   scripts/devnet.sh down            stops everything and removes the devnet's state
#
# State lives in $CONSENSOR_DEVNET_DIR (default build/devnet). Operators use anvil's well-known
# dev accounts 1..N; account 0 deploys. Never use these keys anywhere else.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${CONSENSOR_DEVNET_DIR:-$ROOT/build/devnet}
BUILD=${CONSENSOR_BUILD_DIR:-$ROOT/build}
CONSENSOR=$BUILD/node/consensor
CONSENSORD=$BUILD/node/consensord
TOOLS=$ROOT/contracts/node_modules/@foundry-rs
ANVIL=$TOOLS/anvil-linux-amd64/bin/anvil
CAST=$TOOLS/cast-linux-amd64/bin/cast
FORGE=$TOOLS/forge-linux-amd64/bin/forge
MNEMONIC="test test test test test test test test test test test junk"
STAKE=${CONSENSOR_DEVNET_STAKE:-10ether}

log() { printf 'devnet: %s\n' "$*" >&2; }
die() { printf 'devnet: error: %s\n' "$*" >&2; exit 1; }

# A free loopback port below the kernel's ephemeral range: a port from bind(0) is an ephemeral
# one, which any outgoing connection (a node dialing anvil or a peer) may take before the node
# that was given it binds it.
free_port() {
  /usr/bin/python3 - <<'PY'
import random, socket
low, high = 10000, 32768
try:
    high = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    pass
if high <= low + 1000:
    high = 65536
for _ in range(200):
    port = random.randrange(low, high)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("devnet: no free port")
PY
}

ensure_built() {
  if [ ! -x "$ANVIL" ] || ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
    log "installing dependencies (scripts/setup.sh)"
    "$ROOT/scripts/setup.sh"
  fi
  if [ ! -x "$CONSENSOR" ] || [ ! -x "$CONSENSORD" ] || [ -n "${CONSENSOR_DEVNET_REBUILD:-}" ]; then
    log "building consensor and consensord in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target consensor consensord
  fi
}

registrations_settled() {  # registrations_settled BLOCK: the head is 8 blocks past BLOCK
  local head
  head=$("$CAST" block-number --rpc-url "$(rpc_url)" 2>/dev/null) || return 1
  [ "$head" -ge $(($1 + 8)) ]
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq $((seconds * 10))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "timed out waiting for $what"
}

node_count() { cat "$DIR/nodes" 2>/dev/null || echo 0; }
rpc_url() { cat "$DIR/anvil.url"; }
node_addr() { cat "$DIR/node$1/rpc.addr"; }

cmd_up() {
  local n=${1:-4}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "N must be between 1 and 32"
  if [ -f "$DIR/anvil.pid" ] && kill -0 "$(cat "$DIR/anvil.pid")" 2>/dev/null; then
    die "a devnet is already running in $DIR (scripts/devnet.sh down first)"
  fi
  ensure_built
  rm -rf "$DIR"
  mkdir -p "$DIR"

  local port
  port=$(free_port)
  log "starting anvil on 127.0.0.1:$port"
  # Blocks every second, so reference blocks settle and certificates verify right away.
  # Account 0 deploys, accounts 1..N are the operators (anvil funds 10 unless told more).
  "$ANVIL" --host 127.0.0.1 --port "$port" --block-time 1 --accounts $((n < 10 ? 10 : n + 1)) >"$DIR/anvil.log" 2>&1 &
  echo $! >"$DIR/anvil.pid"
  echo "http://127.0.0.1:$port" >"$DIR/anvil.url"
  wait_for 30 "anvil" "$CAST" chain-id --rpc-url "$(rpc_url)"
  local chain_id
  chain_id=$("$CAST" chain-id --rpc-url "$(rpc_url)")

  log "deploying the AVS contracts"
  local deployer
  deployer=$("$CAST" wallet private-key "$MNEMONIC" 0)
  (
    cd "$ROOT/contracts"
    # forge writes into contracts/ (cache, out, deployments): one deploy at a time.
    exec 9>"$ROOT/contracts/.forge.lock"
    flock 9
    # A >= R and D > A + W + E (600 > 8 + 4 + 64): docs/SECURITY.md, section 5.
    DEPLOYMENT_FILE="deployments/devnet-$port.json" WITHDRAWAL_DELAY_BLOCKS=600 MAX_REFERENCE_AGE=8 CHALLENGE_WINDOW_BLOCKS=4 \
      EVIDENCE_DEADLINE_BLOCKS=64 ACTIVATION_DELAY_BLOCKS=8 \
      "$FORGE" script script/Deploy.s.sol --rpc-url "$(rpc_url)" --broadcast --private-key "$deployer" \
      >"$DIR/deploy.log" 2>&1 || { cat "$DIR/deploy.log" >&2; exit 1; }
    mv "deployments/devnet-$port.json" "$DIR/deployment.json"
  )

  echo "devnet-password" >"$DIR/password"
  chmod 600 "$DIR/password"
  for i in $(seq 1 "$n"); do
    local nd=$DIR/node$i rpc metrics
    mkdir -p "$nd/keystore"
    "$CAST" wallet private-key "$MNEMONIC" "$i" | sed 's/^0x//' >"$nd/key.hex"
    "$CONSENSOR" keys import "$nd/key.hex" --keystore "$nd/keystore" --password-file "$DIR/password" --light-kdf \
      >/dev/null
    rm -f "$nd/key.hex"
    rpc=$(free_port)
    metrics=$(free_port)
    cat >"$nd/consensord.toml" <<EOF
datadir = "$nd/data"
[rpc]
listen = "127.0.0.1:$rpc"
[metrics]
listen = "127.0.0.1:$metrics"
[log]
format = "logfmt"
[executor]
workers = 2
[operator]
keystore = "$(ls "$nd"/keystore/UTC--* | head -1)"
password_file = "$DIR/password"
[chain]
rpc = "$(rpc_url)"
rpc_ws = "$(rpc_url | sed 's|^http://|ws://|')"
deployment = "$DIR/deployment.json"
poll_ms = 500
[p2p]
pull_interval_ms = 1000
[consensus]
replicas = 3
quorum = 2
member_timeout_ms = 10000
# The deployment's R and W (the contract's maxReferenceAge and challengeWindowBlocks above).
max_reference_age = 8
challenge_window_blocks = 4
EOF
    log "registering operator $i ($STAKE, endpoint 127.0.0.1:$rpc)"
    # The keystore just imported (--devnet-key knows anvil's first 10 accounts only).
    "$CONSENSOR" operator register --stake "$STAKE" --endpoint "127.0.0.1:$rpc" --rpc "$(rpc_url)" \
      --deployment "$DIR/deployment.json" --keystore "$(ls "$nd"/keystore/UTC--* | head -1)" \
      --password-file "$DIR/password" >"$nd/register.log" 2>&1 ||
      { cat "$nd/register.log" >&2; die "registering operator $i failed"; }
  done
  # New stake counts A = 8 blocks after its deposit: mine them instead of waiting.
  "$CAST" rpc anvil_mine 8 --rpc-url "$(rpc_url)" >/dev/null
  echo "$n" >"$DIR/nodes"
  registered_at=$("$CAST" block-number --rpc-url "$(rpc_url)")

  for i in $(seq 1 "$n"); do
    local nd=$DIR/node$i
    "$CONSENSORD" --config "$nd/consensord.toml" >"$nd/consensord.log" 2>&1 &
    echo $! >"$nd/pid"
  done
  for i in $(seq 1 "$n"); do
    wait_for 60 "node $i" test -s "$DIR/node$i/data/rpc.addr"
    wait_for 60 "node $i to serve" "$CONSENSOR" node info --node "$(cat "$DIR/node$i/data/rpc.addr")"
    cp "$DIR/node$i/data/rpc.addr" "$DIR/node$i/rpc.addr"
  done
  # Healthy means every node sees every other as a working peer.
  if [ "$n" -gt 1 ]; then
    for i in $(seq 1 "$n"); do
      wait_for 60 "node $i to reach its peers" peers_at_least "$i" $((n - 1))
    done
  fi
  # New tasks take their reference block R = 8 blocks back (less a margin): wait until the
  # registrations are that deep, or the first task would see no operators.
  wait_for 60 "the registrations to be 8 blocks deep" registrations_settled "$registered_at"
  log "devnet up: $n nodes, chain $chain_id at $(rpc_url)"
  cmd_status
}

peers_at_least() {
  local peers
  peers=$("$CONSENSOR" node info --node "$(node_addr "$1")" --json |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("consensus",{}).get("peers",0))')
  [ "$peers" -ge "$2" ]
}

cmd_status() {
  [ -f "$DIR/anvil.url" ] || die "no devnet in $DIR (scripts/devnet.sh up)"
  local head
  head=$("$CAST" block-number --rpc-url "$(rpc_url)" 2>/dev/null || echo "down")
  echo "chain      $(rpc_url)  block $head"
  echo "contracts  $(/usr/bin/python3 -c "import json; d=json.load(open('$DIR/deployment.json')); print('manager', d['ConsensorServiceManager'], 'registry', d['NativeStakeRegistry'])")"
  for i in $(seq 1 "$(node_count)"); do
    local nd=$DIR/node$i state="stopped" info=""
    if [ -f "$nd/pid" ] && kill -0 "$(cat "$nd/pid")" 2>/dev/null; then state="running"; fi
    if [ "$state" = running ] && [ -f "$nd/rpc.addr" ]; then
      info=$("$CONSENSOR" node info --node "$(node_addr "$i")" --json 2>/dev/null |
        /usr/bin/python3 -c 'import json,sys
d=json.load(sys.stdin); c=d.get("consensus",{})
print("%s peers=%s operators=%s tasks=%s" % (d.get("operator_address",""), c.get("peers",0), c.get("operator_count",0), d.get("task_count",0)))' 2>/dev/null || echo "not answering")
    fi
    printf 'node%-2s %-8s %-22s %s\n' "$i" "$state" "$(cat "$nd/rpc.addr" 2>/dev/null || echo -)" "$info"
  done
}

cmd_submit_example() {
  [ -f "$DIR/nodes" ] || die "no devnet in $DIR (scripts/devnet.sh up)"
  local addr out task
  addr=$(node_addr 1)
  out=$DIR/example-out
  rm -rf "$out"
  log "submitting examples/mlp.cgraph to node1 ($addr)"
  "$CONSENSOR" submit "$ROOT/examples/mlp.cgraph" --input x="$ROOT/examples/mlp_x.npy" --node "$addr" \
    --nonce "$(date +%s%N)" --wait --timeout 120 --out "$out" | tee "$DIR/example.txt"
  task=$(awk '/^task/ {print $2; exit}' "$DIR/example.txt")
  log "verifying the certificate of $task against the chain, without trusting the node"
  "$CONSENSOR" verify "$task" --node "$addr" --rpc "$(rpc_url)" --deployment "$DIR/deployment.json"
}

cmd_submit() {
  [ -f "$DIR/nodes" ] || die "no devnet in $DIR (scripts/devnet.sh up)"
  [ $# -ge 1 ] || die "usage: scripts/devnet.sh submit MODEL [consensor submit options]"
  local model=$1 addr result task
  shift
  addr=$(node_addr 1)
  result=$DIR/submit-$(date +%s%N).txt
  log "submitting $model to node1 ($addr)"
  "$CONSENSOR" submit "$model" --node "$addr" --nonce "$(date +%s%N)" --wait --timeout 180 "$@" | tee "$result"
  task=$(awk '/^task/ {print $2; exit}' "$result")
  log "verifying the certificate of $task against the chain, without trusting the node"
  "$CONSENSOR" verify "$task" --node "$addr" --rpc "$(rpc_url)" --deployment "$DIR/deployment.json"
}

cmd_down() {
  if [ ! -d "$DIR" ]; then
    log "no devnet in $DIR"
    return 0
  fi
  for pidfile in "$DIR"/node*/pid; do
    [ -f "$pidfile" ] && kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
  done
  for pidfile in "$DIR"/node*/pid; do
    [ -f "$pidfile" ] || continue
    for _ in $(seq 100); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  done
  [ -f "$DIR/anvil.pid" ] && kill "$(cat "$DIR/anvil.pid")" 2>/dev/null || true
  rm -rf "$DIR"
  log "devnet stopped"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  status) cmd_status ;;
  submit-example) cmd_submit_example ;;
  submit) shift; cmd_submit "$@" ;;
  down) cmd_down ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
