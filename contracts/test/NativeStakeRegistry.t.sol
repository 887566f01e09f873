// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture, EthRejecter, Reenterer} from "./utils/Fixture.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ReentrancyGuard} from "../src/ReentrancyGuard.sol";

contract NativeStakeRegistryTest is Fixture {
    uint256 constant PK_A = 0xA11CE;
    uint256 constant PK_B = 0xB0B;
    address A;
    address B;

    event OperatorRegistered(
        address indexed owner, address indexed signer, uint256 stake, uint256 activatesAtBlock, string endpoint
    );
    event StakeAdded(address indexed owner, uint256 amount, uint256 newStake, uint256 activatesAtBlock);
    event EndpointUpdated(address indexed operator, string endpoint);
    event OperatorDeregistered(address indexed operator, uint256 pendingWithdrawal, uint256 withdrawableAtBlock);
    event StakeWithdrawn(address indexed operator, uint256 amount);

    function setUp() public {
        vm.roll(1000);
        deployDefault();
        A = vm.addr(PK_A);
        B = vm.addr(PK_B);
    }

    // ---------------------------------------------------------------- constructor

    function test_constructor_setsParameters() public view {
        assertEq(registry.minimumStake(), MIN_STAKE, "min");
        assertEq(registry.withdrawalDelayBlocks(), DELAY, "delay");
        assertEq(registry.slasher(), address(manager), "slasher");
        assertEq(registry.MAX_ENDPOINT_LENGTH(), 256, "max endpoint");
    }

    function test_constructor_revertsZeroMinimumStake() public {
        vm.expectRevert(NativeStakeRegistry.ZeroMinimumStake.selector);
        new NativeStakeRegistry(0, DELAY, ACTIVATION, address(1));
    }

    function test_constructor_revertsZeroSlasher() public {
        vm.expectRevert(NativeStakeRegistry.ZeroSlasher.selector);
        new NativeStakeRegistry(1, DELAY, ACTIVATION, address(0));
    }

    function test_constructor_revertsMinimumStakeOverflow() public {
        vm.expectRevert(NativeStakeRegistry.StakeOverflow.selector);
        new NativeStakeRegistry(uint256(type(uint224).max) + 1, DELAY, ACTIVATION, address(1));
    }

    // ---------------------------------------------------------------- register

    function test_register_success() public {
        vm.deal(A, 5 ether);
        vm.expectEmit(true, false, false, true, address(registry));
        emit OperatorRegistered(A, A, 2 ether, 1000 + ACTIVATION, "node-a:7000");
        vm.prank(A);
        registry.register{value: 2 ether}("node-a:7000");

        (NativeStakeRegistry.Status st, bool slashed, uint256 stake, uint256 pending, uint256 wab, string memory ep) =
            registry.operatorInfo(A);
        assertTrue(st == NativeStakeRegistry.Status.Active, "status");
        assertFalse(slashed, "slashed");
        assertEq(stake, 2 ether, "stake");
        assertEq(pending, 0, "pending");
        assertEq(wab, 0, "withdrawable");
        assertEq(ep, "node-a:7000", "endpoint");
        assertEq(registry.endpointOf(A), "node-a:7000", "endpointOf");
        assertEq(registry.stakeOf(A), 0, "stakeOf: not active yet");
        assertEq(registry.slashableStakeOf(A), 2 ether, "slashable");
        assertEq(registry.totalStake(), 2 ether, "total");
        assertEq(registry.stakeAt(A, 1000), 0, "stakeAt now: not active yet");
        assertEq(registry.stakeAt(A, 1000 + ACTIVATION - 1), 0, "stakeAt before activation");
        assertEq(registry.stakeAt(A, 1000 + ACTIVATION), 2 ether, "stakeAt activation");
        assertEq(registry.totalStakeAt(1000), 0, "totalAt now");
        assertEq(registry.totalStakeAt(1000 + ACTIVATION), 2 ether, "totalAt activation");
        assertEq(registry.signerOf(A), A, "signer = owner");
        assertEq(registry.ownerOf(A), A, "bound to itself");
        assertEq(registry.activationBlockOf(A), 1000 + ACTIVATION, "activation block");
        assertEq(registry.operatorCount(), 1, "count");
        assertEq(registry.operatorAtIndex(0), A, "index0");
        assertEq(address(registry).balance, 2 ether, "balance");
        assertEq(registry.stakeCheckpointCount(A), 1, "checkpoints");
        (uint32 bn, uint224 s) = registry.stakeCheckpoint(A, 0);
        assertEq(bn, 1000 + ACTIVATION, "cp block");
        assertEq(s, 2 ether, "cp stake");
        (uint256 ins, uint256 outs) = registry.totalStakeCheckpointCount();
        assertEq(ins, 1, "total deposit checkpoints");
        assertEq(outs, 0, "total exit checkpoints");
    }

    function test_register_exactMinimumAndMaxEndpoint() public {
        vm.deal(A, MIN_STAKE);
        bytes memory ep = new bytes(256);
        for (uint256 i; i < 256; ++i) ep[i] = "x";
        vm.prank(A);
        registry.register{value: MIN_STAKE}(string(ep));
        assertEq(registry.slashableStakeOf(A), MIN_STAKE);
    }

    function test_register_revertsAlreadyRegistered() public {
        register(PK_A, 1 ether);
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.AlreadyRegistered.selector, A));
        registry.register{value: 1 ether}("x");
    }

    function test_register_revertsAlreadyRegisteredWhileExiting() public {
        register(PK_A, 1 ether);
        vm.roll(block.number + ACTIVATION);
        vm.prank(A);
        registry.deregister();
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.AlreadyRegistered.selector, A));
        registry.register{value: 1 ether}("x");
    }

    function test_register_revertsBelowMinimum() public {
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.StakeBelowMinimum.selector, MIN_STAKE - 1, MIN_STAKE));
        registry.register{value: MIN_STAKE - 1}("x");
    }

    function test_register_revertsEmptyEndpoint() public {
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.EmptyEndpoint.selector);
        registry.register{value: 1 ether}("");
    }

    function test_register_revertsEndpointTooLong() public {
        vm.deal(A, 1 ether);
        bytes memory ep = new bytes(257);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.EndpointTooLong.selector, 257, 256));
        registry.register{value: 1 ether}(string(ep));
    }

    function test_register_revertsAfterSlash() public {
        register(PK_A, 1 ether);
        vm.prank(address(manager));
        registry.slash(A, type(uint256).max);
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.OperatorWasSlashed.selector, A));
        registry.register{value: 1 ether}("x");
    }

    // ---------------------------------------------------------------- addStake / updateEndpoint

    function test_addStake_success() public {
        register(PK_A, 1 ether);
        vm.roll(1000 + ACTIVATION);
        vm.deal(A, 3 ether);
        vm.expectEmit(true, false, false, true, address(registry));
        emit StakeAdded(A, 3 ether, 4 ether, 1000 + 2 * ACTIVATION);
        vm.prank(A);
        registry.addStake{value: 3 ether}();
        assertEq(registry.stakeOf(A), 1 ether, "active stake");
        assertEq(registry.slashableStakeOf(A), 4 ether, "slashable");
        assertEq(registry.totalStake(), 4 ether, "total");
        assertEq(registry.stakeAt(A, 1000 + ACTIVATION), 1 ether, "old");
        assertEq(registry.stakeAt(A, 1000 + 2 * ACTIVATION - 1), 1 ether, "not yet");
        assertEq(registry.stakeAt(A, 1000 + 2 * ACTIVATION), 4 ether, "new");
        assertEq(registry.totalStakeAt(1000 + 2 * ACTIVATION), 4 ether, "new total");
    }

    function test_addStake_revertsNotActive() public {
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, A));
        registry.addStake{value: 1 ether}();
    }

    function test_addStake_revertsZeroAmount() public {
        register(PK_A, 1 ether);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.ZeroAmount.selector);
        registry.addStake();
    }

    function test_updateEndpoint_success() public {
        register(PK_A, 1 ether);
        vm.expectEmit(true, false, false, true, address(registry));
        emit EndpointUpdated(A, "new:1");
        vm.prank(A);
        registry.updateEndpoint("new:1");
        assertEq(registry.endpointOf(A), "new:1", "endpoint");
    }

    function test_updateEndpoint_reverts() public {
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, A));
        registry.updateEndpoint("x");
        register(PK_A, 1 ether);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.EmptyEndpoint.selector);
        registry.updateEndpoint("");
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.EndpointTooLong.selector, 300, 256));
        registry.updateEndpoint(string(new bytes(300)));
    }

    // ---------------------------------------------------------------- deregister / withdraw

    function test_deregister_and_withdraw() public {
        register(PK_A, 2 ether);
        register(PK_B, 1 ether);
        vm.roll(1010);
        vm.expectEmit(true, false, false, true, address(registry));
        emit OperatorDeregistered(A, 2 ether, 1010 + DELAY);
        vm.prank(A);
        registry.deregister();

        (NativeStakeRegistry.Status st,, uint256 stake, uint256 pending, uint256 wab,) = registry.operatorInfo(A);
        assertTrue(st == NativeStakeRegistry.Status.Exiting, "exiting");
        assertEq(stake, 0, "stake");
        assertEq(pending, 2 ether, "pending");
        assertEq(wab, 1010 + DELAY, "withdrawableAt");
        assertEq(registry.totalStake(), 1 ether, "total");
        assertEq(registry.totalPendingWithdrawals(), 2 ether, "total pending");
        assertEq(registry.slashableStakeOf(A), 2 ether, "still slashable");
        assertEq(registry.stakeAt(A, 1009), 2 ether, "history kept");
        assertEq(registry.stakeAt(A, 1010), 0, "zero after");
        assertEq(registry.totalStakeAt(1009), 3 ether, "total history");
        assertEq(registry.totalStakeAt(1010), 1 ether, "total now");

        vm.roll(1010 + DELAY - 1);
        vm.prank(A);
        vm.expectRevert(
            abi.encodeWithSelector(NativeStakeRegistry.WithdrawalDelayNotPassed.selector, 1010 + DELAY - 1, 1010 + DELAY)
        );
        registry.withdraw();

        vm.roll(1010 + DELAY);
        uint256 before = A.balance;
        vm.expectEmit(true, false, false, true, address(registry));
        emit StakeWithdrawn(A, 2 ether);
        vm.prank(A);
        registry.withdraw();
        assertEq(A.balance, before + 2 ether, "paid");
        assertEq(registry.totalPendingWithdrawals(), 0, "pending cleared");
        assertEq(address(registry).balance, 1 ether, "registry balance");
        (st,,, pending, wab,) = registry.operatorInfo(A);
        assertTrue(st == NativeStakeRegistry.Status.None, "none");
        assertEq(pending, 0, "pending");

        // may register again (with its signer), stays a single entry in the operator list
        register(PK_A, 1 ether);
        assertEq(registry.operatorCount(), 2, "count");
        assertEq(registry.slashableStakeOf(A), 1 ether, "re-registered");
        assertEq(registry.stakeAt(A, block.number + ACTIVATION), 1 ether, "active after A");
    }

    function test_deregister_revertsNotActive() public {
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, A));
        registry.deregister();
        register(PK_A, 1 ether);
        vm.roll(block.number + ACTIVATION);
        vm.prank(A);
        registry.deregister();
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, A));
        registry.deregister();
    }

    function test_withdraw_revertsNotExiting() public {
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotExiting.selector, A));
        registry.withdraw();
        register(PK_A, 1 ether);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotExiting.selector, A));
        registry.withdraw();
    }

    function test_withdraw_revertsTransferFailed() public {
        EthRejecter r = new EthRejecter();
        vm.deal(address(this), 1 ether);
        r.call{value: 1 ether}(address(registry), 1 ether, abi.encodeWithSignature("register(string)", "r:1"));
        vm.roll(block.number + ACTIVATION);
        r.call(address(registry), 0, abi.encodeCall(registry.deregister, ()));
        vm.roll(block.number + DELAY);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.TransferFailed.selector, address(r), 1 ether));
        r.call(address(registry), 0, abi.encodeCall(registry.withdraw, ()));
    }

    function test_withdraw_reentrancyBlocked() public {
        Reenterer r = new Reenterer();
        vm.deal(address(this), 1 ether);
        r.call{value: 1 ether}(address(registry), 1 ether, abi.encodeWithSignature("register(string)", "r:1"));
        vm.roll(block.number + ACTIVATION);
        r.call(address(registry), 0, abi.encodeCall(registry.deregister, ()));
        vm.roll(block.number + DELAY);
        r.arm(address(registry), abi.encodeCall(registry.withdraw, ()));
        r.call(address(registry), 0, abi.encodeCall(registry.withdraw, ()));
        assertFalse(r.reentrySucceeded(), "reentry must fail");
        assertEq(keccak256(r.reentryRevertData()), keccak256(abi.encodeWithSelector(ReentrancyGuard.Reentrancy.selector)), "Reentrancy");
        assertEq(address(r).balance, 1 ether, "paid once");
        assertEq(address(registry).balance, 0, "empty");
    }

    // ---------------------------------------------------------------- slash hook

    function test_slash_revertsOnlySlasher() public {
        register(PK_A, 1 ether);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.OnlySlasher.selector, address(this)));
        registry.slash(A, 1);
    }

    function test_slash_partialEjectsAndKeepsRemainderPending() public {
        register(PK_A, 3 ether);
        vm.roll(1005);
        vm.prank(address(manager));
        uint256 got = registry.slash(A, 1 ether);
        assertEq(got, 1 ether, "slashed");
        assertEq(address(manager).balance, 1 ether, "sent to slasher");
        (NativeStakeRegistry.Status st, bool slashed, uint256 stake, uint256 pending, uint256 wab,) =
            registry.operatorInfo(A);
        assertTrue(st == NativeStakeRegistry.Status.Exiting, "ejected");
        assertTrue(slashed, "flag");
        assertEq(stake, 0, "no active stake");
        assertEq(pending, 2 ether, "remainder pending");
        assertEq(wab, 1005 + DELAY, "fresh delay");
        assertEq(registry.totalStake(), 0, "total");
        // slashed operators cannot add stake (not active) but can withdraw the remainder later
        vm.roll(1005 + DELAY);
        vm.prank(A);
        registry.withdraw();
        assertEq(A.balance, 2 ether, "remainder withdrawn");
    }

    function test_slash_zeroAmountAndUnknownOperatorReturnZero() public {
        register(PK_A, 1 ether);
        vm.startPrank(address(manager));
        assertEq(registry.slash(A, 0), 0, "zero amount");
        assertEq(registry.slash(B, type(uint256).max), 0, "unknown");
        vm.stopPrank();
        assertEq(registry.slashableStakeOf(A), 1 ether, "untouched");
    }

    function test_slash_takesPendingWithdrawal() public {
        register(PK_A, 2 ether);
        vm.roll(block.number + ACTIVATION);
        vm.prank(A);
        registry.deregister();
        vm.prank(address(manager));
        assertEq(registry.slash(A, type(uint256).max), 2 ether, "all pending");
        vm.roll(block.number + DELAY);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotExiting.selector, A));
        registry.withdraw();
    }

    // ---------------------------------------------------------------- overflow guards

    function test_register_revertsStakeOverflow() public {
        uint256 huge = uint256(type(uint224).max) + 1;
        vm.deal(A, huge);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.StakeOverflow.selector);
        registry.register{value: huge}("x");
    }

    function test_register_revertsBlockNumberOverflow() public {
        vm.roll(uint256(type(uint32).max) + 1);
        vm.deal(A, 1 ether);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.BlockNumberOverflow.selector);
        registry.register{value: 1 ether}("x");
    }

    function test_deregister_revertsBlockNumberOverflow() public {
        vm.roll(uint256(type(uint32).max) - DELAY - ACTIVATION + 1);
        register(PK_A, 1 ether);
        vm.roll(block.number + ACTIVATION);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.BlockNumberOverflow.selector);
        registry.deregister();
    }

    // ---------------------------------------------------------------- checkpoints / operatorsAt

    function test_sameBlockChangesOverwriteCheckpoint() public {
        register(PK_A, 1 ether);
        register(PK_B, 2 ether);
        assertEq(registry.stakeCheckpointCount(A), 1, "one checkpoint");
        (uint256 ins,) = registry.totalStakeCheckpointCount();
        assertEq(ins, 1, "one total checkpoint");
        assertEq(registry.totalStakeAt(1000 + ACTIVATION), 3 ether, "both");
    }

    function test_operatorsAt_history() public {
        register(PK_A, 1 ether); // block 1000, active from 1008
        vm.roll(1001);
        register(PK_B, 2 ether); // active from 1009
        vm.roll(1010);
        vm.prank(A);
        registry.deregister();

        (address[] memory ops, uint256[] memory st) = registry.operatorsAt(1000 + ACTIVATION - 1);
        assertEq(ops.length, 0, "none before activation");
        (ops, st) = registry.operatorsAt(1000 + ACTIVATION);
        assertEq(ops.length, 1, "one");
        assertEq(ops[0], A);
        assertEq(st[0], 1 ether);
        (ops, st) = registry.operatorsAt(1001 + ACTIVATION);
        assertEq(ops.length, 2, "two");
        assertEq(ops[0], A);
        assertEq(ops[1], B);
        assertEq(st[1], 2 ether);
        (ops, st) = registry.operatorsAt(1010);
        assertEq(ops.length, 1, "A left");
        assertEq(ops[0], B);
        (ops, st) = registry.operatorsAt(type(uint256).max);
        assertEq(ops.length, 1, "future = latest");
    }

    uint256 internal constant WINDOW = 80;

    /// Model-based fuzz: random deposits, exits and block gaps; every query (past and future
    /// blocks of the window) must match a plain per-block record in which a deposit at block b
    /// counts from b + A and an exit at b from b.
    function testFuzz_checkpointsMatchModel(uint256 seed) public {
        uint256 startBlock = block.number;
        uint256[] memory modelA = new uint256[](WINDOW);
        uint256[] memory modelB = new uint256[](WINDOW);
        uint256 offset;
        for (uint256 step; step < 24; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            offset += r % 4; // 0 = same block
            if (offset + ACTIVATION >= WINDOW) break;
            vm.roll(startBlock + offset);
            bool isA = (r >> 16) % 2 == 0;
            (int256 kind, uint256 amount) = _randomAction(r, isA ? A : B);
            if (kind == 3) break; // withdrawal: jumps past the window
            uint256[] memory m = isA ? modelA : modelB;
            if (kind == 0) {
                for (uint256 k = offset + ACTIVATION; k < WINDOW; ++k) m[k] = amount;
            } else if (kind == 1) {
                for (uint256 k = offset + ACTIVATION; k < WINDOW; ++k) m[k] += amount;
            } else if (kind == 2) {
                for (uint256 k = offset; k < WINDOW; ++k) m[k] = 0;
            }
        }
        for (uint256 k; k < WINDOW; ++k) {
            assertEq(registry.stakeAt(A, startBlock + k), modelA[k], "stakeAt");
            assertEq(registry.totalStakeAt(startBlock + k), modelA[k] + modelB[k], "totalStakeAt");
        }
        assertEq(registry.stakeAt(A, startBlock - 1), 0, "before start");
    }

    /// @return kind 0 register, 1 addStake, 2 deregister, 3 withdraw, -1 nothing
    function _randomAction(uint256 r, address who) internal returns (int256 kind, uint256 amount) {
        uint256 action = (r >> 8) % 4;
        (NativeStakeRegistry.Status st,,,,,) = registry.operatorInfo(who);
        bool waiting = registry.activationBlockOf(who) > block.number;
        amount = 1 ether + ((r >> 24) % 5) * 1 ether;
        if (action == 0 && st == NativeStakeRegistry.Status.None) {
            register(who == A ? PK_A : PK_B, amount);
            return (0, amount);
        } else if (action == 1 && st == NativeStakeRegistry.Status.Active && !waiting) {
            vm.deal(who, amount);
            vm.prank(who);
            registry.addStake{value: amount}();
            return (1, amount);
        } else if (action == 2 && st == NativeStakeRegistry.Status.Active && !waiting) {
            vm.prank(who);
            registry.deregister();
            return (2, 0);
        } else if (action == 3 && st == NativeStakeRegistry.Status.Exiting) {
            vm.roll(block.number + DELAY);
            vm.prank(who);
            registry.withdraw();
            return (3, 0);
        }
        return (-1, 0);
    }
}
