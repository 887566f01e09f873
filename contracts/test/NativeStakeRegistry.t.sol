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

    event OperatorRegistered(address indexed operator, uint256 stake, string endpoint);
    event StakeAdded(address indexed operator, uint256 amount, uint256 newStake);
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
        new NativeStakeRegistry(0, DELAY, address(1));
    }

    function test_constructor_revertsZeroSlasher() public {
        vm.expectRevert(NativeStakeRegistry.ZeroSlasher.selector);
        new NativeStakeRegistry(1, DELAY, address(0));
    }

    function test_constructor_revertsMinimumStakeOverflow() public {
        vm.expectRevert(NativeStakeRegistry.StakeOverflow.selector);
        new NativeStakeRegistry(uint256(type(uint224).max) + 1, DELAY, address(1));
    }

    // ---------------------------------------------------------------- register

    function test_register_success() public {
        vm.deal(A, 5 ether);
        vm.expectEmit(true, false, false, true, address(registry));
        emit OperatorRegistered(A, 2 ether, "node-a:7000");
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
        assertEq(registry.stakeOf(A), 2 ether, "stakeOf");
        assertEq(registry.slashableStakeOf(A), 2 ether, "slashable");
        assertEq(registry.totalStake(), 2 ether, "total");
        assertEq(registry.stakeAt(A, 1000), 2 ether, "stakeAt now");
        assertEq(registry.stakeAt(A, 999), 0, "stakeAt before");
        assertEq(registry.totalStakeAt(1000), 2 ether, "totalAt now");
        assertEq(registry.operatorCount(), 1, "count");
        assertEq(registry.operatorAtIndex(0), A, "index0");
        assertEq(address(registry).balance, 2 ether, "balance");
        assertEq(registry.stakeCheckpointCount(A), 1, "checkpoints");
        (uint32 bn, uint224 s) = registry.stakeCheckpoint(A, 0);
        assertEq(bn, 1000, "cp block");
        assertEq(s, 2 ether, "cp stake");
        assertEq(registry.totalStakeCheckpointCount(), 1, "total checkpoints");
    }

    function test_register_exactMinimumAndMaxEndpoint() public {
        vm.deal(A, MIN_STAKE);
        bytes memory ep = new bytes(256);
        for (uint256 i; i < 256; ++i) ep[i] = "x";
        vm.prank(A);
        registry.register{value: MIN_STAKE}(string(ep));
        assertEq(registry.stakeOf(A), MIN_STAKE);
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
        vm.roll(1001);
        vm.deal(A, 3 ether);
        vm.expectEmit(true, false, false, true, address(registry));
        emit StakeAdded(A, 3 ether, 4 ether);
        vm.prank(A);
        registry.addStake{value: 3 ether}();
        assertEq(registry.stakeOf(A), 4 ether, "stake");
        assertEq(registry.totalStake(), 4 ether, "total");
        assertEq(registry.stakeAt(A, 1000), 1 ether, "old");
        assertEq(registry.stakeAt(A, 1001), 4 ether, "new");
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

        // may register again, stays a single entry in the operator list
        register(PK_A, 1 ether);
        assertEq(registry.operatorCount(), 2, "count");
        assertEq(registry.stakeOf(A), 1 ether, "re-registered");
    }

    function test_deregister_revertsNotActive() public {
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, A));
        registry.deregister();
        register(PK_A, 1 ether);
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
        r.call{value: 1 ether}(address(registry), 1 ether, abi.encodeCall(registry.register, ("r:1")));
        r.call(address(registry), 0, abi.encodeCall(registry.deregister, ()));
        vm.roll(block.number + DELAY);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.TransferFailed.selector, address(r), 1 ether));
        r.call(address(registry), 0, abi.encodeCall(registry.withdraw, ()));
    }

    function test_withdraw_reentrancyBlocked() public {
        Reenterer r = new Reenterer();
        vm.deal(address(this), 1 ether);
        r.call{value: 1 ether}(address(registry), 1 ether, abi.encodeCall(registry.register, ("r:1")));
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
        assertEq(registry.stakeOf(A), 1 ether, "untouched");
    }

    function test_slash_takesPendingWithdrawal() public {
        register(PK_A, 2 ether);
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
        vm.roll(uint256(type(uint32).max) - DELAY + 1);
        register(PK_A, 1 ether);
        vm.prank(A);
        vm.expectRevert(NativeStakeRegistry.BlockNumberOverflow.selector);
        registry.deregister();
    }

    // ---------------------------------------------------------------- checkpoints / operatorsAt

    function test_sameBlockChangesOverwriteCheckpoint() public {
        register(PK_A, 1 ether);
        vm.deal(A, 1 ether);
        vm.prank(A);
        registry.addStake{value: 1 ether}();
        assertEq(registry.stakeCheckpointCount(A), 1, "one checkpoint");
        assertEq(registry.stakeAt(A, 1000), 2 ether, "latest value");
        assertEq(registry.totalStakeCheckpointCount(), 1, "one total checkpoint");
    }

    function test_operatorsAt_history() public {
        register(PK_A, 1 ether); // block 1000
        vm.roll(1001);
        register(PK_B, 2 ether);
        vm.roll(1002);
        vm.prank(A);
        registry.deregister();

        (address[] memory ops, uint256[] memory st) = registry.operatorsAt(999);
        assertEq(ops.length, 0, "none before");
        (ops, st) = registry.operatorsAt(1000);
        assertEq(ops.length, 1, "one");
        assertEq(ops[0], A);
        assertEq(st[0], 1 ether);
        (ops, st) = registry.operatorsAt(1001);
        assertEq(ops.length, 2, "two");
        assertEq(ops[0], A);
        assertEq(ops[1], B);
        assertEq(st[1], 2 ether);
        (ops, st) = registry.operatorsAt(1002);
        assertEq(ops.length, 1, "A left");
        assertEq(ops[0], B);
        (ops, st) = registry.operatorsAt(type(uint256).max);
        assertEq(ops.length, 1, "future = latest");
    }

    /// Model-based fuzz: random stake changes over random block gaps; every historic query must
    /// match a plain per-block record.
    function testFuzz_checkpointsMatchModel(uint256 seed) public {
        uint256 startBlock = block.number;
        uint256[] memory modelA = new uint256[](60);
        uint256[] memory modelTotal = new uint256[](60);
        uint256 blockOffset;
        for (uint256 step; step < 20; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            blockOffset += r % 3; // 0 = same block
            if (blockOffset >= 60) break;
            vm.roll(startBlock + blockOffset);
            if (_randomAction(r)) break;
            for (uint256 k = blockOffset; k < 60; ++k) {
                modelA[k] = registry.stakeOf(A);
                modelTotal[k] = registry.stakeOf(A) + registry.stakeOf(B);
            }
        }
        for (uint256 k; k < 60; ++k) {
            if (startBlock + k >= block.number) break;
            assertEq(registry.stakeAt(A, startBlock + k), modelA[k], "stakeAt");
            assertEq(registry.totalStakeAt(startBlock + k), modelTotal[k], "totalStakeAt");
        }
        assertEq(registry.stakeAt(A, startBlock - 1), 0, "before start");
    }

    /// @return stop true after a withdrawal (which jumps past the modelled window)
    function _randomAction(uint256 r) internal returns (bool stop) {
        uint256 action = (r >> 8) % 4;
        address who = (r >> 16) % 2 == 0 ? A : B;
        (NativeStakeRegistry.Status st,,,,,) = registry.operatorInfo(who);
        uint256 amount = 1 ether + ((r >> 24) % 5) * 1 ether;
        if (action == 0 && st == NativeStakeRegistry.Status.None) {
            register(who == A ? PK_A : PK_B, amount);
        } else if (action == 1 && st == NativeStakeRegistry.Status.Active) {
            vm.deal(who, amount);
            vm.prank(who);
            registry.addStake{value: amount}();
        } else if (action == 2 && st == NativeStakeRegistry.Status.Active) {
            vm.prank(who);
            registry.deregister();
        } else if (action == 3 && st == NativeStakeRegistry.Status.Exiting) {
            vm.roll(block.number + DELAY);
            vm.prank(who);
            registry.withdraw();
            return true;
        }
        return false;
    }
}
