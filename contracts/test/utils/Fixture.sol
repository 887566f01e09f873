// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Test} from "./Test.sol";
import {NativeStakeRegistry} from "../../src/NativeStakeRegistry.sol";
import {ConsensorServiceManager} from "../../src/ConsensorServiceManager.sol";
import {IStakeSource} from "../../src/IStakeSource.sol";

/// @notice Deploys registry + service manager (manager address precomputed so the registry can
///         name it as its slasher) and offers signing helpers.
abstract contract Fixture is Test {
    uint256 internal constant MIN_STAKE = 1 ether;
    uint32 internal constant DELAY = 100;
    uint256 internal constant THRESHOLD_BPS = 6667;
    uint256 internal constant REWARD_BPS = 1000;
    address internal constant TREASURY = address(0x7EA5);
    uint256 internal constant SECP256K1_N =
        0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141;

    // R, W, E, A and the replication floor of the test deployment (A >= R, DELAY > A + W + E).
    uint64 internal constant MAX_REFERENCE_AGE = 8;
    uint32 internal constant ACTIVATION = 8;
    uint64 internal constant CHALLENGE_WINDOW = 4;
    uint64 internal constant EVIDENCE_DEADLINE = 32;

    NativeStakeRegistry internal registry;
    ConsensorServiceManager internal manager;

    function params() internal pure returns (ConsensorServiceManager.Params memory) {
        return ConsensorServiceManager.Params(MAX_REFERENCE_AGE, CHALLENGE_WINDOW, EVIDENCE_DEADLINE, 1);
    }

    function deploy(uint256 minStake, uint32 delay, uint256 thresholdBps, uint256 rewardBps) internal {
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        registry = new NativeStakeRegistry(minStake, delay, ACTIVATION, predicted);
        manager =
            new ConsensorServiceManager(IStakeSource(address(registry)), thresholdBps, rewardBps, TREASURY, params());
        assertEq(address(manager), predicted, "predicted manager address");
    }

    /// @dev The test contract itself acts as a reporter in many tests.
    receive() external payable {}

    function deployDefault() internal {
        deploy(MIN_STAKE, DELAY, THRESHOLD_BPS, REWARD_BPS);
    }

    /// @dev Registers the key `pk` as owner and signer; its stake counts from block.number + A.
    function register(uint256 pk, uint256 stake) internal returns (address op) {
        op = vm.addr(pk);
        vm.deal(op, op.balance + stake);
        vm.prank(op);
        registry.register{value: stake}("127.0.0.1:7000");
    }

    /// @dev Registers `owner` with the signer key `signerPk`; returns the signer address.
    function registerWithSigner(address owner, uint256 signerPk, uint256 stake) internal returns (address signer) {
        signer = vm.addr(signerPk);
        vm.deal(owner, owner.balance + stake);
        vm.prank(owner);
        registry.register{value: stake}(signer, "127.0.0.1:7000", signerProof(signerPk, owner));
    }

    /// @dev The key `signerPk`'s proof of possession that lets `owner` bind it. The digest is
    ///      written out here (docs/CONTRACTS.md) rather than read from the registry: an external
    ///      call would use up a pending vm.prank.
    function signerProof(uint256 signerPk, address owner) internal view returns (bytes memory) {
        bytes32 digest = keccak256(
            abi.encode(keccak256("consensor.signer-binding.v1"), block.chainid, address(registry), owner, vm.addr(signerPk))
        );
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(signerPk, digest);
        return abi.encodePacked(r, s, v);
    }

    function att(bytes32 taskId, bytes32 resultRoot, uint64 ref)
        internal
        pure
        returns (ConsensorServiceManager.Attestation memory a)
    {
        a = ConsensorServiceManager.Attestation({
            taskId: taskId,
            resultRoot: resultRoot,
            traceRoot: keccak256(abi.encode("trace", resultRoot)),
            referenceBlock: ref
        });
    }

    function digestOf(ConsensorServiceManager.Attestation memory a) internal view returns (bytes32) {
        return manager.attestationDigest(a.taskId, a.resultRoot, a.traceRoot, a.referenceBlock);
    }

    function sign(uint256 pk, ConsensorServiceManager.Attestation memory a) internal view returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(pk, digestOf(a));
        return abi.encodePacked(r, s, v);
    }

    /// @dev Sorts private keys by their address, ascending (insertion sort; small n).
    function sortByAddress(uint256[] memory pks) internal pure returns (uint256[] memory) {
        for (uint256 i = 1; i < pks.length; ++i) {
            uint256 k = pks[i];
            address ka = vm.addr(k);
            uint256 j = i;
            while (j > 0 && vm.addr(pks[j - 1]) > ka) {
                pks[j] = pks[j - 1];
                --j;
            }
            pks[j] = k;
        }
        return pks;
    }

    function signAll(uint256[] memory pks, ConsensorServiceManager.Attestation memory a)
        internal
        view
        returns (bytes[] memory sigs)
    {
        sigs = new bytes[](pks.length);
        for (uint256 i; i < pks.length; ++i) sigs[i] = sign(pks[i], a);
    }
}

/// @notice Rejects every ETH transfer (to test TransferFailed paths).
contract EthRejecter {
    function call(address target, uint256 value, bytes calldata data) external payable returns (bytes memory) {
        (bool ok, bytes memory ret) = target.call{value: value}(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
        return ret;
    }

    receive() external payable {
        revert("no ETH");
    }
}

/// @notice On receiving ETH, re-enters `target` with `data` (to test the reentrancy guards).
contract Reenterer {
    address public target;
    bytes public data;
    bool public armed;

    function arm(address target_, bytes calldata data_) external {
        target = target_;
        data = data_;
        armed = true;
    }

    function call(address t, uint256 value, bytes calldata d) external payable returns (bytes memory) {
        (bool ok, bytes memory ret) = t.call{value: value}(d);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
        return ret;
    }

    bytes public reentryRevertData;
    bool public reentrySucceeded;

    receive() external payable {
        if (armed) {
            armed = false;
            (bool ok, bytes memory ret) = target.call(data);
            reentrySucceeded = ok;
            reentryRevertData = ret;
        }
    }
}
