#!/usr/bin/env bash
# End-to-end check against a real anvil: deploy with script/Deploy.s.sol, register an operator
# with cast, check the EIP-712 digest computed independently with cast, sign two conflicting
# attestations with `cast wallet sign --no-hash` (r||s||v) and slash via slashEquivocation.
# Starts anvil on a random high port and kills it (by its pid) on exit.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
BIN=node_modules/@foundry-rs
FORGE=$BIN/forge-linux-amd64/bin/forge
CAST=$BIN/cast-linux-amd64/bin/cast
ANVIL=$BIN/anvil-linux-amd64/bin/anvil
# anvil picks a free port itself (a random port may be taken) and prints it; a loaded machine
# may take a while to start it, so wait up to 60 s.
LOG=$(mktemp)
$ANVIL --host 127.0.0.1 --port 0 >"$LOG" 2>&1 &
APID=$!
trap 'kill $APID 2>/dev/null || true; rm -f "$LOG"' EXIT
RPC=
for _ in $(seq 600); do
  ADDR=$(sed -n 's/^Listening on \(.*\)$/\1/p' "$LOG" | head -1)
  if [ -n "$ADDR" ] && $CAST chain-id --rpc-url "http://$ADDR" >/dev/null 2>&1; then RPC=http://$ADDR; break; fi
  kill -0 $APID 2>/dev/null || { cat "$LOG"; echo "anvil exited"; exit 1; }
  sleep 0.1
done
[ -n "$RPC" ] || { cat "$LOG"; echo "anvil did not come up"; exit 1; }

M="test test test test test test test test test test test junk"
K0=$($CAST wallet private-key "$M" 0); K1=$($CAST wallet private-key "$M" 1); K2=$($CAST wallet private-key "$M" 2)
A1=$($CAST wallet address --private-key "$K1")

# R=2, W=2, E=8, A=2: evidence about block REF is accepted through block REF + 8; the stake
# deposited at block b counts from b + 2; the withdrawal delay must exceed A + W + E.
WITHDRAWAL_DELAY_BLOCKS=20 MAX_REFERENCE_AGE=2 CHALLENGE_WINDOW_BLOCKS=2 EVIDENCE_DEADLINE_BLOCKS=8 ACTIVATION_DELAY_BLOCKS=2 \
  $FORGE script script/Deploy.s.sol --rpc-url "$RPC" --broadcast --private-key "$K0" >/dev/null
CHAIN=$($CAST chain-id --rpc-url "$RPC")
REG=$(python3 -c "import json;print(json.load(open('deployments/$CHAIN.json'))['NativeStakeRegistry'])")
SM=$(python3 -c "import json;print(json.load(open('deployments/$CHAIN.json'))['ConsensorServiceManager'])")
echo "deployed: registry $REG manager $SM (chain $CHAIN)"
[ "$($CAST call "$REG" 'slasher()(address)' --rpc-url "$RPC")" = "$SM" ] || { echo "slasher mismatch"; exit 1; }
[ "$($CAST call "$SM" 'thresholdBps()(uint256)' --rpc-url "$RPC")" = "6667" ] || { echo "threshold mismatch"; exit 1; }
[ "$($CAST call "$SM" 'finalityBlock(uint64)(uint256)' 1 --rpc-url "$RPC")" = "6" ] || { echo "finalityBlock mismatch"; exit 1; }
[ "$($CAST call "$REG" 'activationDelayBlocks()(uint32)' --rpc-url "$RPC")" = "2" ] || { echo "activation delay mismatch"; exit 1; }

gasused() { python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["status"] in ("0x1",1), r; print(int(r["gasUsed"],16))'; }
echo "register tx gasUsed: $($CAST send "$REG" 'register(string)' 127.0.0.1:7001 --value 2ether --private-key "$K1" --rpc-url "$RPC" --json | gasused)"
# The stake counts A=2 blocks after the registration block: sign about that block.
REF=$(( $($CAST block-number --rpc-url "$RPC") + 2 ))
[ "$($CAST call "$REG" 'stakeAt(address,uint256)(uint256)' "$A1" $((REF - 1)) --rpc-url "$RPC" | cut -d' ' -f1)" = "0" ] || { echo "stake active too early"; exit 1; }
$CAST rpc anvil_mine 3 --rpc-url "$RPC" >/dev/null

# independent EIP-712 digest
TH=$($CAST keccak "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
AH=$($CAST keccak "Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)")
DS=$($CAST keccak "$($CAST abi-encode 'f(bytes32,bytes32,bytes32,uint256,address)' "$TH" "$($CAST keccak Consensor)" "$($CAST keccak 1)" "$CHAIN" "$SM")")
[ "$($CAST call "$SM" 'domainSeparator()(bytes32)' --rpc-url "$RPC")" = "$DS" ] || { echo "domain separator mismatch"; exit 1; }
T=0x$(printf '%064x' 1); R1=0x$(printf '%064x' 2); R2=0x$(printf '%064x' 3); TR=0x$(printf '%064x' 4)
digest() { $CAST keccak "$($CAST concat-hex 0x1901 "$DS" "$($CAST keccak "$($CAST abi-encode 'f(bytes32,bytes32,bytes32,bytes32,uint64)' "$AH" "$1" "$2" "$3" "$4")")")"; }
D1=$(digest "$T" "$R1" "$TR" "$REF"); D2=$(digest "$T" "$R2" "$TR" "$REF")
[ "$($CAST call "$SM" 'attestationDigest(bytes32,bytes32,bytes32,uint64)(bytes32)' "$T" "$R1" "$TR" "$REF" --rpc-url "$RPC")" = "$D1" ] || { echo "digest mismatch"; exit 1; }
echo "EIP-712 digest matches independent computation: $D1"
S1=$($CAST wallet sign --no-hash "$D1" --private-key "$K1"); S2=$($CAST wallet sign --no-hash "$D2" --private-key "$K1")
ATT='(bytes32,bytes32,bytes32,uint64)'
[ "$($CAST call "$SM" "recoverAttestationSigner($ATT,bytes)(address)" "($T,$R1,$TR,$REF)" "$S1" --rpc-url "$RPC")" = "$A1" ] || { echo "recover mismatch"; exit 1; }
echo "slashEquivocation tx gasUsed: $($CAST send "$SM" "slashEquivocation($ATT,bytes,$ATT,bytes)" "($T,$R1,$TR,$REF)" "$S1" "($T,$R2,$TR,$REF)" "$S2" --private-key "$K2" --rpc-url "$RPC" --json | gasused)"
[ "$($CAST call "$REG" 'slashableStakeOf(address)(uint256)' "$A1" --rpc-url "$RPC")" = "0" ] || { echo "not slashed"; exit 1; }
echo "treasury balance: $($CAST balance 0x000000000000000000000000000000000000dEaD --rpc-url "$RPC") wei"
if $CAST call "$SM" "slashEquivocation($ATT,bytes,$ATT,bytes)" "($T,$R1,$TR,$REF)" "$S1" "($T,$R2,$TR,$REF)" "$S2" --rpc-url "$RPC" >/dev/null 2>&1; then
  echo "replay was accepted"; exit 1
fi
echo "e2e OK"
