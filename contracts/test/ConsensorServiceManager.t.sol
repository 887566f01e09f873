// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture, EthRejecter, Reenterer} from "./utils/Fixture.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ReentrancyGuard} from "../src/ReentrancyGuard.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";
import {IStakeSource} from "../src/IStakeSource.sol";

contract ConsensorServiceManagerTest is Fixture {
    uint256 constant PK_BAD = 0xBAD;
    uint256[] honestPks; // 4 honest operators, sorted by address
    address bad;
    address reporter = address(0xBEEF);
    bytes32 constant TASK = keccak256("task-1");
    bytes32 constant GOOD_ROOT = keccak256("good");
    bytes32 constant BAD_ROOT = keccak256("bad");
    uint64 REF;

    function setUp() public {
        vm.roll(500);
        deployDefault();
        bad = register(PK_BAD, 2 ether);
        uint256[] memory pks = new uint256[](4);
        for (uint256 i; i < 4; ++i) {
            pks[i] = 0x1000 + i;
            register(pks[i], 2 ether);
        }
        pks = sortByAddress(pks);
        for (uint256 i; i < 4; ++i) honestPks.push(pks[i]);
        // The stake deposited at 500 counts from 500 + A = 508 on.
        REF = 510;
        vm.roll(520);
    }

    function honest() internal view returns (uint256[] memory p) {
        p = honestPks;
    }

    function subset(uint256[] memory pks, uint256 from, uint256 to) internal pure returns (uint256[] memory p) {
        p = new uint256[](to - from);
        for (uint256 i = from; i < to; ++i) p[i - from] = pks[i];
    }

    // ================================================================ constructor

    function _newManager(IStakeSource src, uint256 th, uint256 rw, address tr) internal returns (address) {
        return address(new ConsensorServiceManager(src, th, rw, tr, params()));
    }

    function test_constructor_parameters() public view {
        assertEq(address(manager.stakeSource()), address(registry), "source");
        assertEq(manager.thresholdBps(), THRESHOLD_BPS, "threshold");
        assertEq(manager.rewardBps(), REWARD_BPS, "reward");
        assertEq(manager.treasury(), TREASURY, "treasury");
    }

    function test_constructor_reverts() public {
        IStakeSource src = IStakeSource(address(registry));
        vm.expectRevert(ConsensorServiceManager.ZeroStakeSource.selector);
        _newManager(IStakeSource(address(0)), 6667, 0, TREASURY);
        vm.expectRevert(ConsensorServiceManager.ZeroTreasury.selector);
        _newManager(src, 6667, 0, address(0));
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidThresholdBps.selector, 5000));
        _newManager(src, 5000, 0, TREASURY);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidThresholdBps.selector, 10001));
        _newManager(src, 10001, 0, TREASURY);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidRewardBps.selector, 10001));
        _newManager(src, 6667, 10001, TREASURY);
        address next = vm.computeCreateAddress(address(this), vm.getNonce(address(this)));
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.StakeSourceSlasherMismatch.selector, next, address(manager))
        );
        _newManager(src, 6667, 0, TREASURY);
        // boundaries accepted (with a fresh registry pointing at the next manager)
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        NativeStakeRegistry r2 = new NativeStakeRegistry(1, uint32(ACTIVATION + CHALLENGE_WINDOW + EVIDENCE_DEADLINE + 1), ACTIVATION, predicted);
        assertEq(_newManager(IStakeSource(address(r2)), 10000, 10000, TREASURY), predicted, "boundaries");
    }

    function test_receive_rejectsOthers() public {
        vm.deal(address(this), 1 ether);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.UnexpectedEther.selector, address(this)));
        (bool ok,) = address(manager).call{value: 1}("");
        ok;
    }

    // ================================================================ EIP-712

    function test_typehashes() public view {
        assertEq(
            manager.DOMAIN_TYPEHASH(),
            keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
            "domain typehash"
        );
        assertEq(
            manager.ATTESTATION_TYPEHASH(),
            keccak256("Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)"),
            "attestation typehash"
        );
        assertEq(manager.NAME(), "Consensor", "name");
        assertEq(manager.VERSION(), "1", "version");
    }

    function test_domainSeparator_and_digest() public {
        bytes32 ds = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("Consensor"),
                keccak256("1"),
                block.chainid,
                address(manager)
            )
        );
        assertEq(manager.domainSeparator(), ds, "domain");
        bytes32 sh = keccak256(
            abi.encode(
                keccak256("Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)"),
                bytes32(uint256(1)),
                bytes32(uint256(2)),
                bytes32(uint256(3)),
                uint64(4)
            )
        );
        bytes32 d = keccak256(abi.encodePacked(hex"1901", ds, sh));
        assertEq(manager.attestationDigest(bytes32(uint256(1)), bytes32(uint256(2)), bytes32(uint256(3)), 4), d, "digest");
        emit log_named_uint("chainId", block.chainid);
        emit log_named_address("verifyingContract", address(manager));
        emit log_named_bytes32("domainSeparator", ds);
        emit log_named_bytes32("digest(1,2,3,4)", d);

        // a fork to another chain id recomputes the domain
        vm.chainId(1);
        bytes32 ds1 = keccak256(
            abi.encode(manager.DOMAIN_TYPEHASH(), keccak256("Consensor"), keccak256("1"), uint256(1), address(manager))
        );
        assertEq(manager.domainSeparator(), ds1, "domain after chain id change");
        assertTrue(ds1 != ds, "differs");
    }

    // ================================================================ signatures (fuzz)

    function _bound(uint256 pk) internal pure returns (uint256) {
        return bound(pk, 1, SECP256K1_N - 1);
    }

    function testFuzz_recover_validSignature(uint256 pk, bytes32 taskId, bytes32 root, uint64 ref) public view {
        pk = _bound(pk);
        ConsensorServiceManager.Attestation memory a = att(taskId, root, ref);
        assertEq(manager.recoverAttestationSigner(a, sign(pk, a)), vm.addr(pk), "signer");
    }

    function testFuzz_recover_rejectsHighS(uint256 pk, bytes32 taskId) public {
        pk = _bound(pk);
        ConsensorServiceManager.Attestation memory a = att(taskId, GOOD_ROOT, 1);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(pk, digestOf(a));
        // the malleated twin (r, n - s, v ^ 1) is a valid ECDSA signature with high s
        bytes32 s2 = bytes32(SECP256K1_N - uint256(s));
        uint8 v2 = v == 27 ? 28 : 27;
        assertEq(ecrecover(digestOf(a), v2, r, s2), vm.addr(pk), "twin recovers natively");
        vm.expectRevert(ConsensorServiceManager.InvalidSignatureS.selector);
        manager.recoverAttestationSigner(a, abi.encodePacked(r, s2, v2));
    }

    function testFuzz_recover_rejectsWrongV(uint256 pk, uint8 v2) public {
        pk = _bound(pk);
        vm.assume(v2 != 27 && v2 != 28);
        ConsensorServiceManager.Attestation memory a = att(TASK, GOOD_ROOT, 1);
        (, bytes32 r, bytes32 s) = vm.sign(pk, digestOf(a));
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureV.selector, v2));
        manager.recoverAttestationSigner(a, abi.encodePacked(r, s, v2));
    }

    function testFuzz_recover_rejectsWrongLength(bytes memory sig) public {
        vm.assume(sig.length != 65);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureLength.selector, sig.length));
        manager.recoverAttestationSigner(att(TASK, GOOD_ROOT, 1), sig);
    }

    /// Random 65 bytes either revert with one of the signature errors or recover some address
    /// that is not the claimed operator's.
    function testFuzz_recover_randomBytes(bytes32 r, bytes32 s, uint8 v) public view {
        ConsensorServiceManager.Attestation memory a = att(TASK, GOOD_ROOT, 1);
        try manager.recoverAttestationSigner(a, abi.encodePacked(r, s, v)) returns (address signer) {
            assertTrue(signer != address(0), "nonzero");
            assertTrue(signer != bad, "cannot forge");
            assertTrue(uint256(s) <= SECP256K1_N / 2 && (v == 27 || v == 28), "accepted only canonical");
        } catch (bytes memory err) {
            bytes4 sel = bytes4(err);
            assertTrue(
                sel == ConsensorServiceManager.InvalidSignatureS.selector
                    || sel == ConsensorServiceManager.InvalidSignatureV.selector
                    || sel == ConsensorServiceManager.InvalidSignature.selector,
                "known error"
            );
        }
    }

    function test_recover_rejectsZeroRecovery() public {
        // r = 0 is never a valid point: ecrecover returns address(0)
        vm.expectRevert(ConsensorServiceManager.InvalidSignature.selector);
        manager.recoverAttestationSigner(att(TASK, GOOD_ROOT, 1), abi.encodePacked(bytes32(0), bytes32(uint256(1)), uint8(27)));
    }

    // ================================================================ equivocation

    function _equivocation() internal view returns (
        ConsensorServiceManager.Attestation memory a1,
        bytes memory s1,
        ConsensorServiceManager.Attestation memory a2,
        bytes memory s2
    ) {
        a1 = att(TASK, GOOD_ROOT, REF);
        a2 = att(TASK, BAD_ROOT, REF);
        s1 = sign(PK_BAD, a1);
        s2 = sign(PK_BAD, a2);
    }

    function test_slashEquivocation_success() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        uint256 totalBefore = registry.totalStake();
        vm.expectEmit(true, true, true, true, address(manager));
        emit ConsensorServiceManager.EquivocationSlashed(bad, TASK, 2 ether, reporter, 0.2 ether);
        vm.prank(reporter);
        uint256 amount = manager.slashEquivocation(a1, s1, a2, s2);
        assertEq(amount, 2 ether, "amount");
        assertEq(reporter.balance, 0.2 ether, "reward");
        assertEq(TREASURY.balance, 1.8 ether, "treasury");
        assertEq(address(manager).balance, 0, "manager keeps nothing");
        assertEq(registry.totalStake(), totalBefore - 2 ether, "total");
        assertEq(registry.slashableStakeOf(bad), 0, "nothing left");
        assertTrue(manager.evidenceUsed(bad, TASK), "used");
        (NativeStakeRegistry.Status st, bool slashed,,,,) = registry.operatorInfo(bad);
        assertTrue(st == NativeStakeRegistry.Status.None, "removed");
        assertTrue(slashed, "flag");
        // historic stake is kept (committees for old reference blocks stay computable)
        assertEq(registry.stakeAt(bad, REF), 2 ether, "history");
        assertEq(registry.stakeAt(bad, block.number), 0, "now zero");
    }

    function test_slashEquivocation_exitingOperatorStillSlashable() public {
        vm.prank(bad);
        registry.deregister();
        // The last block the evidence is accepted in; the stake is still pending (DELAY > W + E).
        vm.roll(REF + EVIDENCE_DEADLINE);
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        vm.prank(reporter);
        assertEq(manager.slashEquivocation(a1, s1, a2, s2), 2 ether, "pending slashed");
        assertEq(registry.totalPendingWithdrawals(), 0, "pending gone");
    }

    function test_slashEquivocation_differentTraceAndRefStillEquivocation() public {
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, BAD_ROOT, REF - 1);
        vm.prank(reporter);
        manager.slashEquivocation(a1, sign(PK_BAD, a1), a2, sign(PK_BAD, a2));
        assertEq(registry.slashableStakeOf(bad), 0, "slashed");
    }

    function test_slashEquivocation_revertsTaskIdMismatch() public {
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory a2 = att(keccak256("other"), BAD_ROOT, REF);
        bytes memory s1 = sign(PK_BAD, a1);
        bytes memory s2 = sign(PK_BAD, a2);
        vm.expectRevert(ConsensorServiceManager.TaskIdMismatch.selector);
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashEquivocation_revertsSameResultRoot() public {
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, GOOD_ROOT, REF - 1);
        bytes memory s1 = sign(PK_BAD, a1);
        bytes memory s2 = sign(PK_BAD, a2);
        vm.expectRevert(ConsensorServiceManager.SameResultRoot.selector);
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashEquivocation_revertsSignerMismatch() public {
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, BAD_ROOT, REF);
        uint256 other = honestPks[0];
        bytes memory s1 = sign(PK_BAD, a1);
        bytes memory s2 = sign(other, a2);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerMismatch.selector, bad, vm.addr(other))
        );
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashEquivocation_revertsEvidenceAlreadyUsed() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        manager.slashEquivocation(a1, s1, a2, s2);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.EvidenceAlreadyUsed.selector, bad, TASK));
        manager.slashEquivocation(a1, s1, a2, s2);
        // swapped order / a third conflicting attestation for the same task is the same evidence
        ConsensorServiceManager.Attestation memory a3 = att(TASK, keccak256("third"), REF);
        bytes memory s3 = sign(PK_BAD, a3);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.EvidenceAlreadyUsed.selector, bad, TASK));
        manager.slashEquivocation(a3, s3, a1, s1);
    }

    function test_slashEquivocation_revertsNothingToSlash() public {
        // a key that never registered
        uint256 pk = 0xDEAD;
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, BAD_ROOT, REF);
        bytes memory u1 = sign(pk, a1);
        bytes memory u2 = sign(pk, a2);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(pk))
        );
        manager.slashEquivocation(a1, u1, a2, u2);
        // an operator already slashed for another task has nothing left
        (, bytes memory s1,, bytes memory s2) = _equivocation();
        manager.slashEquivocation(a1, s1, a2, s2);
        bytes32 t2 = keccak256("task-2");
        ConsensorServiceManager.Attestation memory b1 = att(t2, GOOD_ROOT, REF);
        ConsensorServiceManager.Attestation memory b2 = att(t2, BAD_ROOT, REF);
        bytes memory v1 = sign(PK_BAD, b1);
        bytes memory v2 = sign(PK_BAD, b2);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.NothingToSlash.selector, bad));
        manager.slashEquivocation(b1, v1, b2, v2);
        assertFalse(manager.evidenceUsed(bad, t2), "revert rolled back the marker");
    }

    function test_slashEquivocation_revertsBadSignatures() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2,) =
            _equivocation();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureLength.selector, 64));
        manager.slashEquivocation(a1, s1, a2, new bytes(64));
        bytes memory badV = bytes.concat(bytes32(uint256(1)), bytes32(uint256(1)), bytes1(uint8(29)));
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureV.selector, 29));
        manager.slashEquivocation(a1, badV, a2, s1);
    }

    function test_slashEquivocation_revertsTransferFailedToReporter() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        EthRejecter r = new EthRejecter();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.TransferFailed.selector, address(r), 0.2 ether));
        r.call(address(manager), 0, abi.encodeCall(manager.slashEquivocation, (a1, s1, a2, s2)));
    }

    function test_slashEquivocation_revertsTransferFailedToTreasury() public {
        EthRejecter rej = new EthRejecter();
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        registry = new NativeStakeRegistry(MIN_STAKE, DELAY, ACTIVATION, predicted);
        manager = new ConsensorServiceManager(
            IStakeSource(address(registry)), THRESHOLD_BPS, REWARD_BPS, address(rej), params()
        );
        register(PK_BAD, 2 ether);
        REF = uint64(block.number + ACTIVATION);
        vm.roll(REF + 1);
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        vm.prank(reporter);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.TransferFailed.selector, address(rej), 1.8 ether));
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashEquivocation_reentrancyBlocked() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        Reenterer r = new Reenterer();
        bytes memory call_ = abi.encodeCall(manager.slashEquivocation, (a1, s1, a2, s2));
        r.arm(address(manager), call_);
        r.call(address(manager), 0, call_);
        assertFalse(r.reentrySucceeded(), "reentry must fail");
        assertEq(
            keccak256(r.reentryRevertData()),
            keccak256(abi.encodeWithSelector(ReentrancyGuard.Reentrancy.selector)),
            "Reentrancy"
        );
        assertEq(address(r).balance, 0.2 ether, "rewarded once");
    }

    function test_slashEquivocation_zeroRewardAllToTreasury() public {
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        registry = new NativeStakeRegistry(MIN_STAKE, DELAY, ACTIVATION, predicted);
        manager = new ConsensorServiceManager(IStakeSource(address(registry)), THRESHOLD_BPS, 0, TREASURY, params());
        register(PK_BAD, 3 ether);
        REF = uint64(block.number + ACTIVATION);
        vm.roll(REF + 1);
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        uint256 tBefore = TREASURY.balance;
        vm.prank(reporter);
        manager.slashEquivocation(a1, s1, a2, s2);
        assertEq(reporter.balance, 0, "no reward");
        assertEq(TREASURY.balance - tBefore, 3 ether, "all to treasury");
    }

    // ================================================================ dispute

    function _dispute(uint256[] memory signers)
        internal
        view
        returns (
            ConsensorServiceManager.Attestation memory accused,
            bytes memory accusedSig,
            ConsensorServiceManager.Attestation memory certified,
            bytes[] memory sigs
        )
    {
        accused = att(TASK, BAD_ROOT, REF);
        accusedSig = sign(PK_BAD, accused);
        certified = att(TASK, GOOD_ROOT, REF);
        sigs = signAll(signers, certified);
    }

    function test_slashDispute_success() public {
        // 4 honest x 2 ether of 10 ether total = 80% >= 66.67%
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        vm.expectEmit(true, true, true, true, address(manager));
        emit ConsensorServiceManager.DisputeSlashed(bad, TASK, 2 ether, reporter, 0.2 ether, GOOD_ROOT, 8 ether);
        vm.prank(reporter);
        assertEq(manager.slashDispute(ac, as_, ce, sigs), 2 ether, "amount");
        assertEq(reporter.balance, 0.2 ether, "reward");
        assertEq(TREASURY.balance, 1.8 ether, "treasury");
        assertTrue(manager.evidenceUsed(bad, TASK), "used");
        assertEq(registry.totalStake(), 8 ether, "total");
    }

    function test_slashDispute_accusedMayAlsoBeInCertificate() public {
        // the accused also signed the certified result: its stake counts, and it is still slashed
        uint256[] memory pks = new uint256[](4);
        pks[0] = honestPks[0];
        pks[1] = honestPks[1];
        pks[2] = honestPks[2];
        pks[3] = PK_BAD; // 8 of 10 ether
        pks = sortByAddress(pks);
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(pks);
        assertEq(manager.slashDispute(ac, as_, ce, sigs), 2 ether, "amount");
    }

    function test_slashDispute_revertsTaskIdMismatch() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        ce.taskId = keccak256("x");
        vm.expectRevert(ConsensorServiceManager.TaskIdMismatch.selector);
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsReferenceBlockMismatch() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        ce.referenceBlock = REF - 1;
        vm.expectRevert(ConsensorServiceManager.ReferenceBlockMismatch.selector);
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsSameResultRoot() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        ce.resultRoot = BAD_ROOT;
        vm.expectRevert(ConsensorServiceManager.SameResultRoot.selector);
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsReferenceBlockNotFinal() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        vm.roll(REF);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.ReferenceBlockNotFinal.selector, REF, REF));
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsAccusedNotOperator() public {
        // accused registered after the reference block
        uint256 pkLate = 0x1A7E;
        register(pkLate, 5 ether);
        (, , ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _dispute(honest());
        ConsensorServiceManager.Attestation memory ac = att(TASK, BAD_ROOT, REF);
        bytes memory lateSig = sign(pkLate, ac);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(pkLate))
        );
        manager.slashDispute(ac, lateSig, ce, sigs);
    }

    function test_slashDispute_revertsEmptyCertificate() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce,) =
            _dispute(honest());
        vm.expectRevert(ConsensorServiceManager.EmptyCertificate.selector);
        manager.slashDispute(ac, as_, ce, new bytes[](0));
    }

    function test_slashDispute_revertsUnsorted() public {
        uint256[] memory pks = honest();
        (pks[1], pks[2]) = (pks[2], pks[1]);
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(pks);
        vm.expectRevert(
            abi.encodeWithSelector(
                ConsensorServiceManager.SignersNotAscending.selector, vm.addr(pks[1]), vm.addr(pks[2])
            )
        );
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsDuplicate() public {
        uint256[] memory pks = new uint256[](5);
        for (uint256 i; i < 4; ++i) pks[i] = honestPks[i];
        pks[4] = honestPks[3];
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(pks);
        address d = vm.addr(honestPks[3]);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.SignersNotAscending.selector, d, d));
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsSignerNotOperator() public {
        uint256[] memory pks = new uint256[](5);
        for (uint256 i; i < 4; ++i) pks[i] = honestPks[i];
        pks[4] = 0x5EED; // never registered
        pks = sortByAddress(pks);
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(pks);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, vm.addr(0x5EED))
        );
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsInsufficientQuorum() public {
        // 3 x 2 ether = 6 of 10 ether = 60% < 66.67%
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(subset(honest(), 0, 3));
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.InsufficientQuorum.selector, 6 ether, 10 ether, THRESHOLD_BPS)
        );
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsCertificateSignatureErrors() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        bytes memory good = sigs[2];
        sigs[2] = new bytes(66);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureLength.selector, 66));
        manager.slashDispute(ac, as_, ce, sigs);
        sigs[2] = good;
        sigs[2][64] = bytes1(uint8(0)); // v = 0
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureV.selector, 0));
        manager.slashDispute(ac, as_, ce, sigs);
    }

    function test_slashDispute_revertsEvidenceAlreadyUsed() public {
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        manager.slashDispute(ac, as_, ce, sigs);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.EvidenceAlreadyUsed.selector, bad, TASK));
        manager.slashDispute(ac, as_, ce, sigs);
        // and equivocation evidence for the same (operator, task) is spent as well
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.EvidenceAlreadyUsed.selector, bad, TASK));
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashDispute_exactThreshold() public {
        // fresh deployment: A has 6667, B has 3333 ether -> A alone is exactly 66.67%
        deployDefault();
        uint256 pkA = 0xA;
        uint256 pkB = 0xB;
        register(pkA, 6667 ether);
        register(pkB, 3333 ether);
        vm.roll(block.number + ACTIVATION); // the stake counts from here on
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 1);
        ConsensorServiceManager.Attestation memory ce = att(TASK, GOOD_ROOT, ref);
        ConsensorServiceManager.Attestation memory ac = att(TASK, BAD_ROOT, ref);
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = sign(pkA, ce);
        assertEq(manager.slashDispute(ac, sign(pkB, ac), ce, sigs), 3333 ether, "exactly at threshold");

        // one wei less would fail: 6666 / 10000 with B slashed first
        deployDefault();
        register(pkA, 6666 ether);
        register(pkB, 3334 ether);
        vm.roll(block.number + ACTIVATION);
        ref = uint64(block.number);
        vm.roll(block.number + 1);
        ce = att(TASK, GOOD_ROOT, ref);
        ac = att(TASK, BAD_ROOT, ref);
        sigs[0] = sign(pkA, ce);
        bytes memory bSig = sign(pkB, ac);
        vm.expectRevert(
            abi.encodeWithSelector(
                ConsensorServiceManager.InsufficientQuorum.selector, 6666 ether, 10000 ether, THRESHOLD_BPS
            )
        );
        manager.slashDispute(ac, bSig, ce, sigs);
    }

    /// Certificates use the stake AT the reference block, not the current one.
    function test_slashDispute_usesReferenceBlockStake() public {
        // after REF, two honest operators leave and a newcomer joins: the REF committee still rules
        vm.prank(vm.addr(honestPks[0]));
        registry.deregister();
        register(0x7777, 50 ether);
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(honest());
        vm.roll(block.number + 1);
        assertEq(manager.slashDispute(ac, as_, ce, sigs), 2 ether, "slashed by REF quorum");
    }

    // ================================================================ verifyCertificate (view)

    function _certified(uint256[] memory signers)
        internal
        view
        returns (ConsensorServiceManager.Attestation memory certified, bytes[] memory sigs)
    {
        certified = att(TASK, GOOD_ROOT, REF);
        sigs = signAll(signers, certified);
    }

    // ================================================================ issue 16: stake at risk, deadlines, finality

    /// A registry whose slasher is the manager created right after it.
    function _sourceForNextManager() internal returns (IStakeSource) {
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        return IStakeSource(address(new NativeStakeRegistry(MIN_STAKE, DELAY, ACTIVATION, predicted)));
    }

    function test_constructor_timeParameters() public {
        ConsensorServiceManager.Params memory p = params();
        p.maxReferenceAge = 0;
        IStakeSource src = _sourceForNextManager();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidTimeParameters.selector, 0, 4, 32));
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        p = params();
        p.challengeWindowBlocks = 0;
        src = _sourceForNextManager();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidTimeParameters.selector, 8, 0, 32));
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        p = params();
        p.evidenceDeadlineBlocks = 12; // < R + 1 + W: a result could outlive the evidence against it
        src = _sourceForNextManager();
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidTimeParameters.selector, 8, 4, 12));
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        p = params();
        p.evidenceDeadlineBlocks = 13; // exactly R + 1 + W: evidence lands in the window's last block
        src = _sourceForNextManager();
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        p = params();
        p.evidenceDeadlineBlocks = DELAY - 4 - ACTIVATION; // A + W + E >= DELAY: a signer could withdraw before the deadline
        src = _sourceForNextManager();
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.WithdrawalDelayTooShort.selector, DELAY, DELAY + 1)
        );
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        p = params();
        p.minReplicas = 0;
        src = _sourceForNextManager();
        vm.expectRevert(ConsensorServiceManager.InvalidMinReplicas.selector);
        new ConsensorServiceManager(src, 6667, 0, TREASURY, p);
        assertEq(manager.maxReferenceAge(), MAX_REFERENCE_AGE, "R");
        assertEq(manager.challengeWindowBlocks(), CHALLENGE_WINDOW, "W");
        assertEq(manager.evidenceDeadlineBlocks(), EVIDENCE_DEADLINE, "E");
        assertEq(manager.minReplicas(), 1, "min replicas");
    }

    function test_finality() public {
        assertEq(manager.finalityBlock(500), 513, "ref + R + 1 + W");
        vm.roll(513);
        assertFalse(manager.isFinal(500), "the window's last block");
        vm.roll(514);
        assertTrue(manager.isFinal(500), "after it");
    }

    function test_slashEquivocation_evidenceExpires() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        vm.roll(REF + EVIDENCE_DEADLINE + 1);
        vm.prank(reporter);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.EvidenceExpired.selector, REF, REF + EVIDENCE_DEADLINE)
        );
        manager.slashEquivocation(a1, s1, a2, s2);
    }

    function test_slashDispute_evidenceExpires() public {
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(honest());
        ConsensorServiceManager.Attestation memory accused = att(TASK, BAD_ROOT, REF);
        bytes memory accusedSig = sign(PK_BAD, accused);
        vm.roll(REF + EVIDENCE_DEADLINE + 1);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.EvidenceExpired.selector, REF, REF + EVIDENCE_DEADLINE)
        );
        manager.slashDispute(accused, accusedSig, ce, sigs);
        vm.roll(REF + EVIDENCE_DEADLINE);
        assertEq(manager.slashDispute(accused, accusedSig, ce, sigs), 2 ether, "inside the deadline");
    }

    /// Flash/withdrawn stake: a signer whose stake is gone backs nothing, even if it had stake at
    /// the reference block.
    function test_verifyCertificate_refusesSignerNoLongerSlashable() public {
        uint256[] memory signers = honest();
        address gone = vm.addr(signers[0]);
        vm.prank(gone);
        registry.deregister();
        vm.roll(block.number + DELAY);
        vm.prank(gone);
        registry.withdraw();
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(signers);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.SignerNoLongerSlashable.selector, gone));
        manager.verifyCertificate(ce, sigs);
    }

    /// A signer already slashed for the task backs nothing in a certificate for it.
    function test_verifyCertificate_refusesSignerSlashedForTheTask() public {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocation();
        manager.slashEquivocation(a1, s1, a2, s2);
        uint256[] memory signers = new uint256[](1);
        signers[0] = PK_BAD;
        ConsensorServiceManager.Attestation memory ce = att(TASK, GOOD_ROOT, REF);
        bytes[] memory sigs = signAll(signers, ce);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.SignerAlreadySlashedForTask.selector, bad, TASK));
        manager.verifyCertificate(ce, sigs);
    }

    function testFuzz_evidenceDeadline(uint64 ref, uint32 age) public {
        ref = uint64(bound(ref, 1 + ACTIVATION, type(uint32).max - 1000));
        // Fresh stake for this reference block: it counts from ref on, the signature follows.
        vm.roll(ref - ACTIVATION);
        address op = register(0xF00D, 2 ether);
        vm.roll(uint256(ref) + 1 + uint256(age) % (EVIDENCE_DEADLINE * 2));
        ConsensorServiceManager.Attestation memory a1 = att(TASK, GOOD_ROOT, ref);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, BAD_ROOT, ref);
        bytes memory s1 = sign(0xF00D, a1);
        bytes memory s2 = sign(0xF00D, a2);
        if (block.number > uint256(ref) + EVIDENCE_DEADLINE) {
            vm.expectRevert(
                abi.encodeWithSelector(
                    ConsensorServiceManager.EvidenceExpired.selector, ref, uint256(ref) + EVIDENCE_DEADLINE
                )
            );
            manager.slashEquivocation(a1, s1, a2, s2);
        } else {
            assertEq(manager.slashEquivocation(a1, s1, a2, s2), 2 ether, "slashed inside the deadline");
            assertEq(registry.slashableStakeOf(op), 0, "nothing left");
        }
    }

    function test_verifyCertificate_meetsThreshold() public view {
        // 4 honest x 2 ether of 10 ether total = 80%
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(honest());
        (uint256 signed, uint256 total, bool ok) = manager.verifyCertificate(ce, sigs);
        assertEq(signed, 8 ether, "signed");
        assertEq(total, 10 ether, "total");
        assertTrue(ok, "meets threshold");
    }

    function test_verifyCertificate_belowThresholdReturnsFalse() public view {
        // 3 x 2 ether = 60% < 66.67%: reported, not reverted
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(subset(honest(), 0, 3));
        (uint256 signed, uint256 total, bool ok) = manager.verifyCertificate(ce, sigs);
        assertEq(signed, 6 ether, "signed");
        assertEq(total, 10 ether, "total");
        assertFalse(ok, "below threshold");
    }

    function test_verifyCertificate_exactThreshold() public {
        deployDefault();
        register(0xA, 6667 ether);
        register(0xB, 3333 ether);
        vm.roll(block.number + ACTIVATION); // the stake counts from here on
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 1);
        ConsensorServiceManager.Attestation memory ce = att(TASK, GOOD_ROOT, ref);
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = sign(0xA, ce);
        (,, bool ok) = manager.verifyCertificate(ce, sigs);
        assertTrue(ok, "6667 of 10000 meets 6667 bps");
        sigs[0] = sign(0xB, ce);
        (,, ok) = manager.verifyCertificate(ce, sigs);
        assertFalse(ok, "3333 of 10000");
    }

    function test_verifyCertificate_usesReferenceBlockStake() public {
        vm.prank(vm.addr(honestPks[0]));
        registry.deregister();
        register(0x7777, 50 ether);
        vm.roll(block.number + 1);
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(honest());
        (uint256 signed, uint256 total, bool ok) = manager.verifyCertificate(ce, sigs);
        assertEq(signed, 8 ether, "signed at REF");
        assertEq(total, 10 ether, "total at REF");
        assertTrue(ok, "REF quorum");
    }

    function test_verifyCertificate_revertsReferenceBlockNotFinal() public {
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(honest());
        vm.roll(REF);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.ReferenceBlockNotFinal.selector, REF, REF));
        manager.verifyCertificate(ce, sigs);
        ce.referenceBlock = REF + 7;
        sigs = signAll(honest(), ce);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.ReferenceBlockNotFinal.selector, REF + 7, REF));
        manager.verifyCertificate(ce, sigs);
    }

    function test_verifyCertificate_revertsEmpty() public {
        vm.expectRevert(ConsensorServiceManager.EmptyCertificate.selector);
        manager.verifyCertificate(att(TASK, GOOD_ROOT, REF), new bytes[](0));
    }

    function test_verifyCertificate_revertsUnsorted() public {
        uint256[] memory pks = honest();
        (pks[0], pks[3]) = (pks[3], pks[0]);
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(pks);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignersNotAscending.selector, vm.addr(pks[0]), vm.addr(pks[1]))
        );
        manager.verifyCertificate(ce, sigs);
    }

    function test_verifyCertificate_revertsDuplicate() public {
        uint256[] memory pks = new uint256[](3);
        pks[0] = honestPks[0];
        pks[1] = honestPks[1];
        pks[2] = honestPks[1];
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(pks);
        address d = vm.addr(honestPks[1]);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.SignersNotAscending.selector, d, d));
        manager.verifyCertificate(ce, sigs);
    }

    function test_verifyCertificate_revertsSignerNotOperator() public {
        uint256[] memory pks = new uint256[](5);
        for (uint256 i; i < 4; ++i) pks[i] = honestPks[i];
        pks[4] = 0x5EED; // never registered
        pks = sortByAddress(pks);
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(pks);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, vm.addr(0x5EED))
        );
        manager.verifyCertificate(ce, sigs);
        // an operator that registered after the reference block had no stake there
        register(0x1A7E, 5 ether);
        vm.roll(block.number + 1);
        pks[0] = 0x1A7E;
        pks = sortByAddress(subset(pks, 0, 1));
        (ce, sigs) = _certified(pks);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, vm.addr(0x1A7E))
        );
        manager.verifyCertificate(ce, sigs);
    }

    function test_verifyCertificate_revertsBadSignatures() public {
        (ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) = _certified(honest());
        bytes memory good = sigs[1];
        sigs[1] = new bytes(64);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureLength.selector, 64));
        manager.verifyCertificate(ce, sigs);
        sigs[1] = bytes.concat(good);
        sigs[1][64] = bytes1(uint8(1)); // raw recovery id instead of 27/28
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.InvalidSignatureV.selector, 1));
        manager.verifyCertificate(ce, sigs);
        sigs[1] = bytes.concat(good);
        for (uint256 i = 32; i < 64; ++i) sigs[1][i] = 0xff; // s above n/2
        vm.expectRevert(ConsensorServiceManager.InvalidSignatureS.selector);
        manager.verifyCertificate(ce, sigs);
        sigs[1] = abi.encodePacked(bytes32(0), bytes32(uint256(1)), uint8(27));
        vm.expectRevert(ConsensorServiceManager.InvalidSignature.selector);
        manager.verifyCertificate(ce, sigs);
    }

    /// The view and slashDispute agree: the dispute goes through iff meetsThreshold, and the
    /// stake the view reports is the one the DisputeSlashed event carries.
    function testFuzz_verifyCertificate_agreesWithSlashDispute(uint8 mask) public {
        mask = uint8(bound(mask, 1, 15));
        uint256 n;
        for (uint256 i; i < 4; ++i) if (mask & (1 << i) != 0) ++n;
        uint256[] memory chosen = new uint256[](n);
        uint256 k;
        for (uint256 i; i < 4; ++i) if (mask & (1 << i) != 0) chosen[k++] = honestPks[i];
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(chosen);
        (uint256 signed, uint256 total, bool ok) = manager.verifyCertificate(ce, sigs);
        assertEq(signed, n * 2 ether, "signed");
        assertEq(total, 10 ether, "total");
        if (!ok) {
            vm.expectRevert(
                abi.encodeWithSelector(ConsensorServiceManager.InsufficientQuorum.selector, signed, total, THRESHOLD_BPS)
            );
        } else {
            vm.expectEmit(true, true, true, true, address(manager));
            emit ConsensorServiceManager.DisputeSlashed(bad, TASK, 2 ether, address(this), 0.2 ether, GOOD_ROOT, signed);
        }
        manager.slashDispute(ac, as_, ce, sigs);
    }

    // ---------------------------------------------------------------- certificate fuzzing

    /// Random subsets of 8 operators with random stakes: the dispute succeeds iff the subset's
    /// stake reaches the threshold of the total at the reference block.
    function testFuzz_certificate_randomSubsets(uint8 mask, uint256 stakeSeed) public {
        deployDefault();
        register(PK_BAD, 1 ether);
        uint256[] memory pks = new uint256[](8);
        uint256 total = 1 ether;
        for (uint256 i; i < 8; ++i) {
            pks[i] = 0x2000 + i;
            uint256 st = 1 ether + (uint256(keccak256(abi.encode(stakeSeed, i))) % 10) * 1 ether;
            register(pks[i], st);
            total += st;
        }
        pks = sortByAddress(pks);
        vm.roll(block.number + ACTIVATION);
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 3);

        uint256 n;
        for (uint256 i; i < 8; ++i) if (mask & (1 << i) != 0) ++n;
        uint256[] memory chosen = new uint256[](n);
        uint256 k;
        uint256 signed;
        for (uint256 i; i < 8; ++i) {
            if (mask & (1 << i) != 0) {
                chosen[k++] = pks[i];
                signed += registry.stakeAt(vm.addr(pks[i]), ref);
            }
        }
        ConsensorServiceManager.Attestation memory ce = att(TASK, GOOD_ROOT, ref);
        ConsensorServiceManager.Attestation memory ac = att(TASK, BAD_ROOT, ref);
        bytes[] memory sigs = signAll(chosen, ce);
        bytes memory accusedSig = sign(PK_BAD, ac);
        if (n == 0) {
            vm.expectRevert(ConsensorServiceManager.EmptyCertificate.selector);
        } else if (signed * 10_000 < total * THRESHOLD_BPS) {
            vm.expectRevert(
                abi.encodeWithSelector(ConsensorServiceManager.InsufficientQuorum.selector, signed, total, THRESHOLD_BPS)
            );
        }
        manager.slashDispute(ac, accusedSig, ce, sigs);
        if (n > 0 && signed * 10_000 >= total * THRESHOLD_BPS) {
            assertEq(registry.slashableStakeOf(bad), 0, "slashed");
        }
    }

    /// Any certificate whose signer order is not strictly ascending is rejected, even if the
    /// signers would reach the quorum.
    function testFuzz_certificate_unsortedOrDuplicateRejected(uint256 seed, bool duplicate) public {
        uint256[] memory pks = honest();
        if (duplicate) {
            uint256[] memory withDup = new uint256[](5);
            uint256 d = seed % 4;
            uint256 j;
            for (uint256 i; i < 4; ++i) {
                withDup[j++] = pks[i];
                if (i == d) withDup[j++] = pks[i];
            }
            pks = withDup;
        } else {
            // random permutation that is not the identity
            for (uint256 i = pks.length - 1; i > 0; --i) {
                uint256 r = uint256(keccak256(abi.encode(seed, i))) % (i + 1);
                (pks[i], pks[r]) = (pks[r], pks[i]);
            }
            bool sorted = true;
            for (uint256 i = 1; i < pks.length; ++i) if (vm.addr(pks[i - 1]) > vm.addr(pks[i])) sorted = false;
            vm.assume(!sorted);
        }
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce, bytes[] memory sigs) =
            _dispute(pks);
        vm.expectPartialRevert(ConsensorServiceManager.SignersNotAscending.selector);
        manager.slashDispute(ac, as_, ce, sigs);
    }

    /// A certificate signed over anything other than the certified attestation recovers to
    /// unrelated addresses and fails (ordering, membership or quorum), never slashes.
    function testFuzz_certificate_wrongMessageNeverSlashes(bytes32 otherRoot) public {
        vm.assume(otherRoot != GOOD_ROOT && otherRoot != BAD_ROOT);
        (ConsensorServiceManager.Attestation memory ac, bytes memory as_, ConsensorServiceManager.Attestation memory ce,) =
            _dispute(honest());
        bytes[] memory sigs = signAll(honest(), att(TASK, otherRoot, REF));
        try manager.slashDispute(ac, as_, ce, sigs) {
            fail("must not slash");
        } catch {}
        assertEq(registry.slashableStakeOf(bad), 2 ether, "untouched");
    }
}
