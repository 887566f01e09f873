// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Vm, VM_ADDRESS} from "../test/utils/Vm.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";
import {IStakeSource} from "../src/IStakeSource.sol";

/// @notice Deploys NativeStakeRegistry + ConsensorServiceManager and writes
///         deployments/<chainid>.json.
///
///   forge script script/Deploy.s.sol --rpc-url $RPC --broadcast --private-key $KEY
///   (or PRIVATE_KEY=0x... in the environment instead of --private-key)
///
/// Parameters (environment, all optional):
///   MINIMUM_STAKE_WEI (default 1 ether), WITHDRAWAL_DELAY_BLOCKS (default 50400, ~7 days of
///   12 s blocks), THRESHOLD_BPS (default 6667), REWARD_BPS (default 1000),
///   TREASURY (default 0x000000000000000000000000000000000000dEaD, i.e. burn),
///   MAX_REFERENCE_AGE (default 256 blocks), CHALLENGE_WINDOW_BLOCKS (default 300, one hour),
///   EVIDENCE_DEADLINE_BLOCKS (default 7200, a day), MIN_REPLICAS (default 1),
///   ACTIVATION_DELAY_BLOCKS (default: MAX_REFERENCE_AGE, the least the manager accepts).
///   The manager requires EVIDENCE_DEADLINE_BLOCKS >= MAX_REFERENCE_AGE + 1 + CHALLENGE_WINDOW_BLOCKS,
///   ACTIVATION_DELAY_BLOCKS >= MAX_REFERENCE_AGE and WITHDRAWAL_DELAY_BLOCKS >
///   ACTIVATION_DELAY_BLOCKS + CHALLENGE_WINDOW_BLOCKS + EVIDENCE_DEADLINE_BLOCKS (the defaults:
///   50400 > 256 + 300 + 7200).
contract Deploy {
    Vm internal constant vm = Vm(VM_ADDRESS);
    bool public IS_SCRIPT = true;

    function run() external returns (NativeStakeRegistry registry, ConsensorServiceManager manager) {
        uint256 minimumStake = vm.envOr("MINIMUM_STAKE_WEI", uint256(1 ether));
        uint256 delay = vm.envOr("WITHDRAWAL_DELAY_BLOCKS", uint256(50400));
        uint256 thresholdBps = vm.envOr("THRESHOLD_BPS", uint256(6667));
        uint256 rewardBps = vm.envOr("REWARD_BPS", uint256(1000));
        address treasury = vm.envOr("TREASURY", address(0x000000000000000000000000000000000000dEaD));
        require(delay <= type(uint32).max, "WITHDRAWAL_DELAY_BLOCKS too large");
        ConsensorServiceManager.Params memory params = ConsensorServiceManager.Params({
            maxReferenceAge: uint64(vm.envOr("MAX_REFERENCE_AGE", uint256(256))),
            challengeWindowBlocks: uint64(vm.envOr("CHALLENGE_WINDOW_BLOCKS", uint256(300))),
            evidenceDeadlineBlocks: uint64(vm.envOr("EVIDENCE_DEADLINE_BLOCKS", uint256(7200))),
            minReplicas: uint32(vm.envOr("MIN_REPLICAS", uint256(1)))
        });
        uint256 activation = vm.envOr("ACTIVATION_DELAY_BLOCKS", uint256(params.maxReferenceAge));
        require(activation <= type(uint32).max, "ACTIVATION_DELAY_BLOCKS too large");

        uint256 pk = vm.envOr("PRIVATE_KEY", uint256(0));
        if (pk != 0) vm.startBroadcast(pk);
        else vm.startBroadcast();
        (, address deployer,) = vm.readCallers();

        // The registry names the manager as its only slasher: precompute the manager's address
        // (deployed right after the registry, i.e. at the deployer's nonce + 1).
        address predicted = vm.computeCreateAddress(deployer, vm.getNonce(deployer) + 1);
        registry = new NativeStakeRegistry(minimumStake, uint32(delay), uint32(activation), predicted);
        manager = new ConsensorServiceManager(IStakeSource(address(registry)), thresholdBps, rewardBps, treasury, params);
        require(address(manager) == predicted, "manager address prediction failed");
        vm.stopBroadcast();

        string memory json = string.concat(
            "{\n",
            _addressesJson(deployer, address(registry), address(manager)),
            _economicsJson(minimumStake, delay, thresholdBps, rewardBps),
            '  "activationDelayBlocks": ', vm.toString(activation), ",\n",
            _paramsJson(params),
            '  "treasury": "', vm.toString(treasury), '"\n',
            "}\n"
        );
        // DEPLOYMENT_FILE (under deployments/) lets tests deploy side by side.
        string memory out =
            vm.envOr("DEPLOYMENT_FILE", string.concat("deployments/", vm.toString(block.chainid), ".json"));
        vm.writeFile(out, json);
    }

    // Split out of run(): one string.concat of every field is too deep for the legacy codegen.
    function _addressesJson(address deployer, address registry, address manager) internal view returns (string memory) {
        return string.concat(
            '  "chainId": ', vm.toString(block.chainid), ",\n",
            '  "deployer": "', vm.toString(deployer), '",\n',
            '  "deployBlock": ', vm.toString(block.number), ",\n",
            '  "NativeStakeRegistry": "', vm.toString(registry), '",\n',
            '  "ConsensorServiceManager": "', vm.toString(manager), '",\n'
        );
    }

    function _economicsJson(uint256 minimumStake, uint256 delay, uint256 thresholdBps, uint256 rewardBps)
        internal
        pure
        returns (string memory)
    {
        return string.concat(
            '  "minimumStake": "', vm.toString(minimumStake), '",\n',
            '  "withdrawalDelayBlocks": ', vm.toString(delay), ",\n",
            '  "thresholdBps": ', vm.toString(thresholdBps), ",\n",
            '  "rewardBps": ', vm.toString(rewardBps), ",\n"
        );
    }

    function _paramsJson(ConsensorServiceManager.Params memory p) internal pure returns (string memory) {
        return string.concat(
            '  "maxReferenceAge": ', vm.toString(uint256(p.maxReferenceAge)), ",\n",
            '  "challengeWindowBlocks": ', vm.toString(uint256(p.challengeWindowBlocks)), ",\n",
            '  "evidenceDeadlineBlocks": ', vm.toString(uint256(p.evidenceDeadlineBlocks)), ",\n",
            '  "minReplicas": ', vm.toString(uint256(p.minReplicas)), ",\n"
        );
    }
}
