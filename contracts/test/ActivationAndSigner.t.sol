// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture} from "./utils/Fixture.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";
import {IStakeSource} from "../src/IStakeSource.sol";

/// Issue 16, holes 4 and 9: the stake activation delay A (flash stake) and the split of the
/// stake-owning key (owner, cold) from the attestation-signing key (signer, hot).
contract ActivationAndSignerTest is Fixture {
    bytes32 constant TASK = keccak256("task-16");
    bytes32 constant GOOD_ROOT = keccak256("good");
    bytes32 constant BAD_ROOT = keccak256("bad");
    uint256 constant PK_BAD = 0xBAD;
    uint256[] honestPks; // 4 honest operators (own signers), 2 ether each, sorted by address
    address bad;
    address reporter = address(0xBEEF);
    uint256 constant START = 500;

    function setUp() public {
        vm.roll(START);
        deployDefault();
        bad = register(PK_BAD, 2 ether);
        uint256[] memory pks = new uint256[](4);
        for (uint256 i; i < 4; ++i) {
            pks[i] = 0x1000 + i;
            register(pks[i], 2 ether);
        }
        pks = sortByAddress(pks);
        for (uint256 i; i < 4; ++i) honestPks.push(pks[i]);
        vm.roll(START + ACTIVATION); // everything above is active from here on
    }

    function _equivocate(uint256 pk, uint64 ref1, uint64 ref2)
        internal
        view
        returns (
            ConsensorServiceManager.Attestation memory a1,
            bytes memory s1,
            ConsensorServiceManager.Attestation memory a2,
            bytes memory s2
        )
    {
        a1 = att(TASK, GOOD_ROOT, ref1);
        a2 = att(TASK, BAD_ROOT, ref2);
        s1 = sign(pk, a1);
        s2 = sign(pk, a2);
    }

    function _slashEquivocation(uint256 pk, uint64 ref) internal returns (uint256) {
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocate(pk, ref, ref);
        vm.prank(reporter);
        return manager.slashEquivocation(a1, s1, a2, s2);
    }

    function _sourceForNextManager(uint32 delay, uint32 activation) internal returns (IStakeSource) {
        address predicted = vm.computeCreateAddress(address(this), vm.getNonce(address(this)) + 1);
        return IStakeSource(address(new NativeStakeRegistry(MIN_STAKE, delay, activation, predicted)));
    }

    // ================================================================ constructor rules

    function test_constructor_activationDelayAtLeastR() public {
        IStakeSource src = _sourceForNextManager(DELAY, uint32(MAX_REFERENCE_AGE - 1));
        vm.expectRevert(
            abi.encodeWithSelector(
                ConsensorServiceManager.ActivationDelayTooShort.selector, MAX_REFERENCE_AGE - 1, MAX_REFERENCE_AGE
            )
        );
        new ConsensorServiceManager(src, THRESHOLD_BPS, REWARD_BPS, TREASURY, params());
        src = _sourceForNextManager(DELAY, 0);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.ActivationDelayTooShort.selector, 0, MAX_REFERENCE_AGE)
        );
        new ConsensorServiceManager(src, THRESHOLD_BPS, REWARD_BPS, TREASURY, params());
        src = _sourceForNextManager(DELAY, uint32(MAX_REFERENCE_AGE));
        new ConsensorServiceManager(src, THRESHOLD_BPS, REWARD_BPS, TREASURY, params()); // A = R is enough
    }

    function testFuzz_constructor_withdrawalDelayAboveActivationWindowAndDeadline(uint32 a, uint32 d) public {
        a = uint32(bound(a, MAX_REFERENCE_AGE, 10_000));
        d = uint32(bound(d, 0, 20_000));
        uint256 needed = uint256(a) + CHALLENGE_WINDOW + EVIDENCE_DEADLINE + 1;
        IStakeSource src = _sourceForNextManager(d, a);
        if (d < needed) {
            vm.expectRevert(
                abi.encodeWithSelector(ConsensorServiceManager.WithdrawalDelayTooShort.selector, d, needed)
            );
        }
        new ConsensorServiceManager(src, THRESHOLD_BPS, REWARD_BPS, TREASURY, params());
    }

    // ================================================================ activation delay

    /// A deposit at block d counts at reference block r exactly when r >= d + A, for stakeAt,
    /// totalStakeAt and operatorsAt alike.
    function testFuzz_activation_depositVsReferenceBlock(uint16 depositOffset, uint16 refOffset, bool addStake)
        public
    {
        uint256 d = block.number + 1 + depositOffset % 100;
        uint256 r = block.number + refOffset % 250;
        vm.roll(d);
        address who;
        uint256 before = registry.totalStakeAt(d + ACTIVATION);
        if (addStake) {
            who = vm.addr(honestPks[0]);
            vm.deal(who, 5 ether);
            vm.prank(who);
            registry.addStake{value: 5 ether}();
        } else {
            who = register(0x5EED, 5 ether);
        }
        uint256 old = addStake ? 2 ether : 0;
        uint256 expected = r >= d + ACTIVATION ? old + 5 ether : (r >= START + ACTIVATION ? old : 0);
        assertEq(registry.stakeAt(who, r), expected, "stakeAt");
        if (r >= d + ACTIVATION) {
            assertEq(registry.totalStakeAt(r), before + 5 ether, "total counts it");
        } else if (r >= START + ACTIVATION) {
            assertEq(registry.totalStakeAt(r), 10 ether, "total does not count it yet");
        }
        (address[] memory ops, uint256[] memory st) = registry.operatorsAt(r);
        bool listed;
        for (uint256 i; i < ops.length; ++i) {
            if (ops[i] == who) {
                listed = true;
                assertEq(st[i], expected, "operatorsAt stake");
            }
        }
        assertEq(listed, expected > 0, "listed iff active");
    }

    function test_activation_addStakeAndDeregisterWaitForTheDeposit() public {
        address a = register(0xA1, 1 ether);
        uint256 at = block.number + ACTIVATION;
        assertEq(registry.activationBlockOf(a), at, "activation block");
        vm.deal(a, 1 ether);
        vm.startPrank(a);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.StakePendingActivation.selector, at));
        registry.addStake{value: 1 ether}();
        vm.roll(at - 1);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.StakePendingActivation.selector, at));
        registry.deregister();
        vm.roll(at);
        registry.addStake{value: 1 ether}();
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.StakePendingActivation.selector, at + ACTIVATION));
        registry.deregister();
        vm.roll(at + ACTIVATION);
        registry.deregister();
        vm.stopPrank();
        assertEq(registry.slashableStakeOf(a), 2 ether, "all of it pending withdrawal");
    }

    /// The flash-stake attack: a deposit far above the total stake, made in any of the A blocks
    /// before (or at) a reference block, backs no certificate and reaches no dispute threshold
    /// at that block; the honest certificate still holds.
    function testFuzz_flashStake_cannotCertifyOrDispute(uint8 lead) public {
        uint64 ref = uint64(block.number + 20);
        vm.roll(ref - lead % ACTIVATION); // deposit in (ref - A, ref]
        uint256 pkFlash = 0xF1A5;
        address flash = register(pkFlash, 1_000_000 ether);
        vm.roll(ref + 1);

        // the attacker alone signs a wrong result: no valid certificate
        ConsensorServiceManager.Attestation memory wrong = att(TASK, BAD_ROOT, ref);
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = sign(pkFlash, wrong);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, flash)
        );
        manager.verifyCertificate(wrong, sigs);

        // ... nor slash an honest operator with it
        ConsensorServiceManager.Attestation memory right = att(TASK, GOOD_ROOT, ref);
        bytes memory honestSig = sign(honestPks[0], right);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, flash)
        );
        manager.slashDispute(right, honestSig, wrong, sigs);

        // the total at ref does not count it: the honest 4 of 5 still certify and slash `bad`
        assertEq(registry.totalStakeAt(ref), 10 ether, "flash stake not in the total");
        bytes[] memory honestSigs = signAll(honestPks, right);
        (uint256 signed, uint256 total, bool ok) = manager.verifyCertificate(right, honestSigs);
        assertEq(signed, 8 ether, "signed");
        assertEq(total, 10 ether, "total");
        assertTrue(ok, "honest certificate");
        ConsensorServiceManager.Attestation memory badAtt = att(TASK, BAD_ROOT, ref);
        assertEq(manager.slashDispute(badAtt, sign(PK_BAD, badAtt), right, honestSigs), 2 ether, "dispute works");
        // and once A blocks have passed the same stake does count (it has been at risk since)
        assertEq(registry.stakeAt(flash, block.number + ACTIVATION), 1_000_000 ether, "counts later");
    }

    /// Flash stake spread over many keys (so signers can be sorted) cannot dispute an honest
    /// operator either: every one of them is refused.
    function test_flashStake_manyKeysCannotReachTheDisputeThreshold() public {
        uint64 ref = uint64(block.number + 5);
        vm.roll(ref - 1);
        uint256[] memory flashPks = new uint256[](5);
        for (uint256 i; i < 5; ++i) {
            flashPks[i] = 0xF100 + i;
            register(flashPks[i], 100 ether);
        }
        flashPks = sortByAddress(flashPks);
        vm.roll(ref + 1);
        ConsensorServiceManager.Attestation memory wrong = att(TASK, BAD_ROOT, ref);
        ConsensorServiceManager.Attestation memory right = att(TASK, GOOD_ROOT, ref);
        bytes[] memory sigs = signAll(flashPks, wrong);
        bytes memory honestSig = sign(honestPks[1], right);
        vm.expectRevert(
            abi.encodeWithSelector(
                ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, vm.addr(flashPks[0])
            )
        );
        manager.slashDispute(right, honestSig, wrong, sigs);
        assertEq(registry.totalStakeAt(ref), 10 ether, "total unchanged");
    }

    /// A pending deposit is slashable; the slash cancels it in the histories.
    function test_slash_cancelsAPendingDepositExactly() public {
        vm.deal(bad, 3 ether);
        vm.prank(bad);
        registry.addStake{value: 3 ether}(); // active from now + A
        uint256 at = block.number + ACTIVATION;
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 1);
        assertEq(_slashEquivocation(PK_BAD, ref), 5 ether, "active and pending stake taken");
        assertEq(registry.stakeAt(bad, at), 0, "never activates");
        assertEq(registry.totalStakeAt(at), 8 ether, "total exact");
        assertEq(registry.totalStakeAt(ref), 10 ether, "history before the slash kept");
    }

    function test_slash_cancelsAPendingDepositBehindLaterDeposits() public {
        vm.deal(bad, 3 ether);
        vm.prank(bad);
        registry.addStake{value: 3 ether}();
        uint256 at = block.number + ACTIVATION;
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 1);
        register(0xC0FFEE, 1 ether); // dated at + 1
        vm.roll(block.number + 1);
        assertEq(_slashEquivocation(PK_BAD, ref), 5 ether, "slashed");
        assertEq(registry.stakeAt(bad, at), 0, "never activates");
        // the cancellation lands at slash + A: until then the total over-counts (conservative)
        assertEq(registry.totalStakeAt(at), 8 ether + 3 ether, "over-count, never under-count");
        assertEq(registry.totalStakeAt(block.number + ACTIVATION), 9 ether, "exact from slash + A");
    }

    // ================================================================ owner / signer

    function test_ownerSigner_registerAndViews() public {
        address owner = address(0xC01D);
        uint256 hotPk = 0x407;
        address hot = registerWithSigner(owner, hotPk, 3 ether);
        assertEq(registry.signerOf(owner), hot, "signer");
        assertEq(registry.ownerOf(hot), owner, "owner");
        assertEq(registry.ownerOf(owner), address(0), "owner is no signer");
        vm.roll(block.number + ACTIVATION);
        assertEq(registry.stakeAt(hot, block.number), 3 ether, "stake by signer");
        assertEq(registry.stakeAt(owner, block.number), 0, "not by owner");
        assertEq(registry.ownerStakeAt(owner, block.number), 3 ether, "ownerStakeAt");
        assertEq(registry.stakeOf(owner), 3 ether, "stakeOf(owner)");
        (address o, uint256 s) = registry.signerStakeAt(hot, block.number);
        assertEq(o, owner, "signerStakeAt owner");
        assertEq(s, 3 ether, "signerStakeAt stake");
        (NativeStakeRegistry.Status st,, uint256 stake,,, string memory ep) = registry.operatorInfo(hot);
        assertTrue(st == NativeStakeRegistry.Status.Active, "resolved via signer");
        assertEq(stake, 3 ether, "info stake");
        assertEq(ep, "127.0.0.1:7000", "endpoint");
        assertEq(registry.endpointOf(hot), "127.0.0.1:7000", "endpointOf signer");
        (address[] memory ops,) = registry.operatorsAt(block.number);
        assertEq(ops[ops.length - 1], hot, "the operator set lists signers");
        // the hot key signs certificates: 4 honest + hot = 11 of 13 ether
        ConsensorServiceManager.Attestation memory ce = att(TASK, GOOD_ROOT, uint64(block.number));
        vm.roll(block.number + 1);
        uint256[] memory pks = new uint256[](5);
        for (uint256 i; i < 4; ++i) pks[i] = honestPks[i];
        pks[4] = hotPk;
        (uint256 signed,,) = manager.verifyCertificate(ce, signAll(sortByAddress(pks), ce));
        assertEq(signed, 11 ether, "hot key's stake counts");
    }

    /// A stolen hot key can sign, nothing more: it cannot deregister, withdraw, add stake,
    /// rotate, change the endpoint, or register itself elsewhere.
    function test_ownerSigner_hotKeyControlsNoStake() public {
        address owner = address(0xC01D);
        address hot = registerWithSigner(owner, 0x407, 3 ether);
        vm.roll(block.number + ACTIVATION);
        vm.deal(hot, 10 ether);
        vm.startPrank(hot);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, hot));
        registry.deregister();
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotExiting.selector, hot));
        registry.withdraw();
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, hot));
        registry.addStake{value: 1 ether}();
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotRegistered.selector, hot));
        registry.rotateSigner(address(0x1234), "");
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotActive.selector, hot));
        registry.updateEndpoint("evil:1");
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.OwnerIsASigner.selector, hot));
        registry.register{value: 1 ether}("evil:1");
        vm.stopPrank();

        // the owner exits and is paid; the signer gets nothing
        vm.prank(owner);
        registry.deregister();
        vm.roll(block.number + DELAY);
        vm.prank(hot);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.NotExiting.selector, hot));
        registry.withdraw();
        uint256 before = owner.balance;
        vm.prank(owner);
        registry.withdraw();
        assertEq(owner.balance, before + 3 ether, "paid to the owner");
    }

    function test_ownerSigner_bindingRules() public {
        address owner = address(0xC01D);
        address hot = registerWithSigner(owner, 0x407, 1 ether);
        address other = address(0x07E4);
        vm.deal(other, 5 ether);
        vm.startPrank(other);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerAlreadyBound.selector, hot, owner));
        registry.register{value: 1 ether}(hot, "x:1", "");
        vm.expectRevert(NativeStakeRegistry.ZeroSigner.selector);
        registry.register{value: 1 ether}(address(0), "x:1", "");
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerIsAnOwner.selector, owner));
        registry.register{value: 1 ether}(owner, "x:1", "");
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerAlreadyBound.selector, bad, bad));
        registry.register{value: 1 ether}(bad, "x:1", "");
        vm.stopPrank();
        // an owner cannot rotate to another owner's key, a used key, or its own old key
        vm.startPrank(owner);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerAlreadyBound.selector, bad, bad));
        registry.rotateSigner(bad, "");
        address hot2 = vm.addr(0x408);
        registry.rotateSigner(hot2, signerProof(0x408, owner));
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerAlreadyBound.selector, hot, owner));
        registry.rotateSigner(hot, "");
        vm.stopPrank();
    }

    /// Rotation: the old signer's statements about blocks before the rotation remain the
    /// owner's (slashable until their deadline); about later blocks they are nobody's. The new
    /// signer answers only from the rotation on.
    function test_rotation_oldSignaturesStaySlashableNewKeyNotLiableForThem() public {
        address owner = address(0xC01D);
        uint256 oldPk = 0x407;
        uint256 newPk = 0x408;
        registerWithSigner(owner, oldPk, 3 ether);
        vm.roll(block.number + ACTIVATION);
        uint64 before = uint64(block.number);
        vm.roll(block.number + 1);
        uint64 rot = uint64(block.number);
        vm.prank(owner);
        registry.rotateSigner(vm.addr(newPk), signerProof(newPk, owner));
        assertEq(registry.signerAt(owner, before), vm.addr(oldPk), "old before");
        assertEq(registry.signerAt(owner, rot), vm.addr(newPk), "new from the rotation block");
        vm.roll(block.number + 2);

        // the old key about a block after the rotation: nobody's statement
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocate(oldPk, rot, rot);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(oldPk))
        );
        manager.slashEquivocation(a1, s1, a2, s2);
        // ... nor can it mix a bound and an unbound block
        (a1, s1, a2, s2) = _equivocate(oldPk, before, rot);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(oldPk))
        );
        manager.slashEquivocation(a1, s1, a2, s2);
        // the new key about a block before the rotation: not liable, and counts for nothing
        (a1, s1, a2, s2) = _equivocate(newPk, before, before);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(newPk))
        );
        manager.slashEquivocation(a1, s1, a2, s2);
        bytes[] memory one = new bytes[](1);
        one[0] = s1;
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.SignerNotOperatorAtReferenceBlock.selector, vm.addr(newPk))
        );
        manager.verifyCertificate(a1, one);

        // the old key's signatures made before the rotation still slash the owner
        uint256 ownerBefore = registry.slashableStakeOf(owner);
        assertEq(_slashEquivocation(oldPk, before), ownerBefore, "old signatures slash the owner");
        assertTrue(manager.evidenceUsed(vm.addr(oldPk), TASK), "evidence recorded for the signer");
        assertEq(registry.slashableStakeOf(owner), 0, "owner's stake taken");
    }

    /// Fuzz rotation timing against the reference block of an equivocation: slashable exactly
    /// when the key was the owner's signer at that block (and the stake was active), and always
    /// the owner's stake that is taken.
    function testFuzz_rotationTimingVsSlashing(uint8 rotOffset, uint8 refOffset, bool useOldKey) public {
        address owner = address(0xC01D);
        uint256 oldPk = 0x407;
        uint256 newPk = 0x408;
        uint256 reg = block.number;
        registerWithSigner(owner, oldPk, 3 ether);
        uint256 rot = reg + 1 + rotOffset % 20;
        vm.roll(rot);
        vm.prank(owner);
        registry.rotateSigner(vm.addr(newPk), signerProof(newPk, owner));
        uint64 ref = uint64(reg + refOffset % 30); // the evidence about it is never expired here
        vm.roll(uint256(ref) + 1 > rot + 1 ? uint256(ref) + 1 : rot + 1);
        uint256 pk = useOldKey ? oldPk : newPk;
        bool bound = useOldKey ? ref < rot : ref >= rot;
        bool active = ref >= reg + ACTIVATION;
        (ConsensorServiceManager.Attestation memory a1, bytes memory s1, ConsensorServiceManager.Attestation memory a2, bytes memory s2) =
            _equivocate(pk, ref, ref);
        if (!(bound && active)) {
            vm.expectRevert(
                abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, vm.addr(pk))
            );
            manager.slashEquivocation(a1, s1, a2, s2);
            assertEq(registry.slashableStakeOf(owner), 3 ether, "untouched");
        } else {
            assertEq(manager.slashEquivocation(a1, s1, a2, s2), 3 ether, "owner slashed");
            assertEq(registry.slashableStakeOf(owner), 0, "owner's stake gone");
        }
    }

    /// A dispute against a rotated-away signer's attestation made before the rotation works,
    /// and a certificate about that block counts the old signer, not the new one.
    function test_rotation_disputeAndCertificateUseTheSignerAtTheReferenceBlock() public {
        uint64 ref = uint64(block.number);
        vm.roll(block.number + 1);
        address newBad = vm.addr(0xBAD2);
        vm.prank(bad);
        registry.rotateSigner(newBad, signerProof(0xBAD2, bad));
        vm.roll(block.number + 1);
        ConsensorServiceManager.Attestation memory right = att(TASK, GOOD_ROOT, ref);
        ConsensorServiceManager.Attestation memory wrong = att(TASK, BAD_ROOT, ref);
        bytes[] memory honestSigs = signAll(honestPks, right);
        // the new key's signature about ref is nobody's
        bytes memory newKeySig = sign(0xBAD2, wrong);
        vm.expectRevert(
            abi.encodeWithSelector(ConsensorServiceManager.AccusedNotOperatorAtReferenceBlock.selector, newBad)
        );
        manager.slashDispute(wrong, newKeySig, right, honestSigs);
        assertEq(manager.slashDispute(wrong, sign(PK_BAD, wrong), right, honestSigs), 2 ether, "old key's owner slashed");
        assertTrue(manager.evidenceUsed(bad, TASK), "used");
        // everything of the owner is gone: its new key backs nothing any more either
        ConsensorServiceManager.Attestation memory later = att(keccak256("t2"), GOOD_ROOT, uint64(block.number - 1));
        bytes[] memory one = new bytes[](1);
        one[0] = sign(0xBAD2, later);
        vm.expectRevert(abi.encodeWithSelector(ConsensorServiceManager.SignerNoLongerSlashable.selector, newBad));
        manager.verifyCertificate(later, one);
    }

    /// Rotating twice in one block: the intermediate key is never anybody's signer at the end of
    /// a block (it backs nothing, answers for nothing) and can never be bound again.
    function test_rotation_sameBlockOverwriteBurnsTheIntermediateKey() public {
        address mid = vm.addr(0x5A1);
        address fin = vm.addr(0x5A2);
        vm.startPrank(bad);
        registry.rotateSigner(mid, signerProof(0x5A1, bad));
        registry.rotateSigner(fin, signerProof(0x5A2, bad));
        vm.stopPrank();
        assertEq(registry.signerAt(bad, block.number), fin, "last one wins");
        assertEq(registry.stakeAt(mid, block.number), 0, "intermediate backs nothing");
        assertEq(registry.ownerOf(mid), bad, "but stays bound");
        address other = vm.addr(0x0DD);
        vm.deal(other, 1 ether);
        vm.prank(other);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerAlreadyBound.selector, mid, bad));
        registry.register{value: 1 ether}(mid, "x:1", "");
    }

    /// Re-registering after a withdrawal keeps the current signer (or binds a fresh one).
    function test_reregister_keepsOrReplacesTheSigner() public {
        address owner = address(0xC01D);
        address hot = registerWithSigner(owner, 0x407, 1 ether);
        vm.roll(block.number + ACTIVATION);
        vm.prank(owner);
        registry.deregister();
        vm.roll(block.number + DELAY);
        vm.prank(owner);
        registry.withdraw();
        vm.deal(owner, 2 ether);
        vm.prank(owner);
        registry.register{value: 1 ether}(hot, "again:1", "");
        assertEq(registry.signerCheckpointCount(owner), 1, "same signer, no new binding");
        vm.roll(block.number + ACTIVATION);
        vm.prank(owner);
        registry.deregister();
        vm.roll(block.number + DELAY);
        vm.prank(owner);
        registry.withdraw();
        address hot2 = vm.addr(0x408);
        vm.prank(owner);
        registry.register{value: 1 ether}(hot2, "again:2", signerProof(0x408, owner));
        assertEq(registry.signerOf(owner), hot2, "new signer");
        assertEq(registry.signerCheckpointCount(owner), 2, "history");
        (uint32 from, address s) = registry.signerCheckpoint(owner, 0);
        assertEq(s, hot, "first signer kept in the history");
        assertEq(from, START + ACTIVATION, "bound at registration");
    }

    /// The attacker of a binding without proof: it saw the node's address (in the mempool, in a
    /// registration that failed, in the node's logs) and binds it first, so that the victim's
    /// work counts as its own stake and the victim can never register that key. Every proof
    /// it can produce or copy is refused; only the signer's own proof for this owner binds.
    function test_signerProof_onlyTheSignersOwnProofForThisOwnerBinds() public {
        address victimOwner = address(0xC01D);
        uint256 victimPk = 0x407;
        address victimSigner = vm.addr(victimPk);
        address attacker = address(0xA77A);
        vm.deal(attacker, 10 ether);
        bytes memory victimsProof = signerProof(victimPk, victimOwner);
        bytes memory invalid = abi.encodeWithSelector(NativeStakeRegistry.SignerProofInvalid.selector, victimSigner);

        vm.startPrank(attacker);
        // no proof, a truncated one, random bytes
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", "");
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", _slice(victimsProof, 64));
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", abi.encodePacked(keccak256("a"), keccak256("b"), uint8(27)));
        // the victim's own proof, copied from its transaction: it names another owner
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", victimsProof);
        // a proof made by the attacker's key
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", signerProof(0xA77, attacker));
        // the victim's proof in its malleable high-s form
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", _highS(victimsProof));
        vm.stopPrank();

        // a proof made for this owner on another chain does not bind here
        uint256 chain = block.chainid;
        vm.chainId(chain + 1);
        bytes memory otherChain = signerProof(victimPk, victimOwner);
        vm.chainId(chain);
        vm.deal(victimOwner, 2 ether);
        vm.prank(victimOwner);
        vm.expectRevert(invalid);
        registry.register{value: 1 ether}(victimSigner, "x:1", otherChain);

        // the victim registers with its proof: bound to it, not to the attacker
        vm.prank(victimOwner);
        registry.register{value: 1 ether}(victimSigner, "victim:1", victimsProof);
        assertEq(registry.ownerOf(victimSigner), victimOwner, "bound to the owner that held the proof");
        // rotation follows the same rule
        vm.prank(victimOwner);
        vm.expectRevert(abi.encodeWithSelector(NativeStakeRegistry.SignerProofInvalid.selector, vm.addr(0x408)));
        registry.rotateSigner(vm.addr(0x408), signerProof(0x408, attacker));
    }

    /// The registry's digest is the one written down (docs/CONTRACTS.md), which the node and the
    /// CLI compute independently.
    function test_signerProof_digestMatchesTheDocumentedEncoding() public view {
        address owner = address(0xC01D);
        address signer = vm.addr(0x407);
        assertEq(
            registry.signerBindingDigest(owner, signer),
            keccak256(abi.encode(keccak256("consensor.signer-binding.v1"), block.chainid, address(registry), owner, signer))
        );
    }

    /// Any proof that is not the signer's signature over the digest binds nothing.
    function testFuzz_signerProof_randomBytesNeverBind(bytes calldata proof, uint256 signerPk) public {
        signerPk = bound(signerPk, 1, SECP256K1_N - 1);
        address signer = vm.addr(signerPk);
        address owner = address(0xC01D);
        vm.assume(keccak256(proof) != keccak256(signerProof(signerPk, owner)));
        vm.deal(owner, 1 ether);
        vm.prank(owner);
        try registry.register{value: 1 ether}(signer, "x:1", proof) {
            fail("a proof that is not the signer's signature bound it");
        } catch (bytes memory reason) {
            // only the proof check may refuse a fresh signer here
            if (signer == owner || registry.ownerOf(signer) != address(0)) return;
            assertEq(
                keccak256(reason),
                keccak256(abi.encodeWithSelector(NativeStakeRegistry.SignerProofInvalid.selector, signer)),
                "refused for its proof"
            );
        }
    }

    function _slice(bytes memory b, uint256 n) internal pure returns (bytes memory out) {
        out = new bytes(n);
        for (uint256 i; i < n; ++i) out[i] = b[i];
    }

    /// (r, n - s, v ^ 1): the same signature's other valid form, refused to keep one proof per key.
    function _highS(bytes memory sig) internal pure returns (bytes memory) {
        bytes32 r;
        bytes32 s;
        uint8 v = uint8(sig[64]);
        assembly ("memory-safe") {
            r := mload(add(sig, 32))
            s := mload(add(sig, 64))
        }
        return abi.encodePacked(r, bytes32(SECP256K1_N - uint256(s)), v == 27 ? uint8(28) : uint8(27));
    }
}
