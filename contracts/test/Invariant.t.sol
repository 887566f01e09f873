// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture} from "./utils/Fixture.sol";
import {Vm, VM_ADDRESS} from "./utils/Vm.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";

/// Drives registry + manager with random register / addStake / deregister / withdraw /
/// rotateSigner / slash (equivocation and dispute, about reference blocks up to E old, so
/// signatures of rotated-away signers are among them) actions over a fixed set of 6 owner keys
/// (half sign with their own key, half with separate signer keys), tracking ghost totals.
contract Handler {
    Vm internal constant vm = Vm(VM_ADDRESS);
    uint256 internal constant N = 6;
    uint256 internal constant MIN = 1 ether;

    NativeStakeRegistry public registry;
    ConsensorServiceManager public manager;
    address public treasury;
    address public constant REPORTER = address(0xFEED);

    uint256[] public pks;
    // ghosts
    uint256 public deposited;
    uint256 public withdrawn;
    uint256 public slashedTotal;
    mapping(address => uint256) public depositedBy;
    mapping(address => uint256) public withdrawnBy;
    uint256 public calls;
    uint256 public slashes;
    uint256 public disputes;
    uint256 internal taskNonce;
    uint256 public rotations;
    uint256 public oldSignerSlashes;
    mapping(address signer => uint256 pk) public pkOf;
    mapping(uint256 index => uint256 pk) public signerPk; // current signer key of owner `index`
    mapping(uint256 index => uint256) internal rotationCount;

    constructor(NativeStakeRegistry r, ConsensorServiceManager m) {
        registry = r;
        manager = m;
        treasury = m.treasury();
        for (uint256 i; i < N; ++i) {
            pks.push(0x9000 + i);
            uint256 spk = i % 2 == 0 ? 0x9000 + i : 0x19000 + i;
            signerPk[i] = spk;
            pkOf[vm.addr(spk)] = spk;
        }
    }

    function _waiting(address owner) internal view returns (bool) {
        return registry.activationBlockOf(owner) > block.number;
    }

    function _op(uint256 seed) internal view returns (uint256 pk, address a) {
        pk = pks[seed % N];
        a = vm.addr(pk);
    }

    function _status(address a) internal view returns (NativeStakeRegistry.Status st, bool slashed) {
        (st, slashed,,,,) = registry.operatorInfo(a);
    }

    function _proof(uint256 signerPk_, address owner) internal view returns (bytes memory) {
        bytes32 digest = keccak256(
            abi.encode(keccak256("consensor.signer-binding.v1"), block.chainid, address(registry), owner, vm.addr(signerPk_))
        );
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(signerPk_, digest);
        return abi.encodePacked(r, s, v);
    }

    function register(uint256 seed, uint256 amount) external {
        ++calls;
        (, address a) = _op(seed);
        (NativeStakeRegistry.Status st, bool slashed) = _status(a);
        if (st != NativeStakeRegistry.Status.None || slashed) return;
        amount = MIN + amount % (20 ether);
        vm.deal(a, amount);
        vm.prank(a);
        registry.register{value: amount}(vm.addr(signerPk[seed % N]), "h:1", _proof(signerPk[seed % N], a));
        deposited += amount;
        depositedBy[a] += amount;
    }

    function addStake(uint256 seed, uint256 amount) external {
        ++calls;
        (, address a) = _op(seed);
        (NativeStakeRegistry.Status st,) = _status(a);
        if (st != NativeStakeRegistry.Status.Active || _waiting(a)) return;
        amount = 1 + amount % (5 ether);
        vm.deal(a, amount);
        vm.prank(a);
        registry.addStake{value: amount}();
        deposited += amount;
        depositedBy[a] += amount;
    }

    function deregister(uint256 seed) external {
        ++calls;
        (, address a) = _op(seed);
        (NativeStakeRegistry.Status st,) = _status(a);
        if (st != NativeStakeRegistry.Status.Active || _waiting(a)) return;
        vm.prank(a);
        registry.deregister();
    }

    function rotateSigner(uint256 seed) external {
        ++calls;
        uint256 i = seed % N;
        (, address a) = _op(seed);
        (NativeStakeRegistry.Status st,) = _status(a);
        if (st == NativeStakeRegistry.Status.None) return;
        uint256 spk = 0x29000 + i * 1000 + (++rotationCount[i]);
        pkOf[vm.addr(spk)] = spk;
        vm.prank(a);
        registry.rotateSigner(vm.addr(spk), _proof(spk, a));
        signerPk[i] = spk;
        ++rotations;
    }

    function withdraw(uint256 seed) external {
        ++calls;
        (, address a) = _op(seed);
        (NativeStakeRegistry.Status st,,, uint256 pending, uint256 wab,) = registry.operatorInfo(a);
        if (st != NativeStakeRegistry.Status.Exiting || block.number < wab) return;
        uint256 before = a.balance;
        vm.prank(a);
        registry.withdraw();
        require(a.balance == before + pending, "withdraw paid pending");
        withdrawn += pending;
        withdrawnBy[a] += pending;
    }

    function advance(uint256 blocks) external {
        ++calls;
        vm.roll(block.number + 1 + blocks % 60);
    }

    function slashEquivocation(uint256 seed) external {
        ++calls;
        if ((seed >> 128) % 4 != 0) return; // keep slashing rare enough for long-lived operators
        (uint64 ref, uint256 pk) = _equivocator(seed);
        if (pk == 0) return;
        bytes32 task = keccak256(abi.encode("eq", ++taskNonce));
        ConsensorServiceManager.Attestation memory a1 =
            ConsensorServiceManager.Attestation(task, keccak256("r1"), bytes32(0), ref);
        ConsensorServiceManager.Attestation memory a2 =
            ConsensorServiceManager.Attestation(task, keccak256("r2"), bytes32(0), ref);
        bytes memory s1 = _sign(pk, a1);
        bytes memory s2 = _sign(pk, a2);
        uint256 rBefore = REPORTER.balance;
        uint256 tBefore = treasury.balance;
        vm.prank(REPORTER);
        uint256 amount = manager.slashEquivocation(a1, s1, a2, s2);
        require(REPORTER.balance + treasury.balance == rBefore + tBefore + amount, "split sums to amount");
        slashedTotal += amount;
        ++slashes;
    }

    /// @dev A reference block the evidence about is still accepted and the key of the signer of
    ///      owner `seed` then (0 when there is none with stake).
    function _equivocator(uint256 seed) internal returns (uint64 ref, uint256 pk) {
        (, address a) = _op(seed);
        if (registry.slashableStakeOf(a) == 0 || block.number < 3) return (0, 0);
        uint256 e = manager.evidenceDeadlineBlocks();
        uint256 maxAge = block.number - 2 < e ? block.number - 2 : e;
        ref = uint64(block.number - 1 - (seed >> 8) % maxAge);
        address signer = registry.signerAt(a, ref);
        if (registry.stakeAt(signer, ref) == 0) return (0, 0);
        pk = pkOf[signer];
        if (signer != registry.signerOf(a)) ++oldSignerSlashes;
    }

    /// Dispute at reference block block.number - 1: everyone but the accused with stake there
    /// signs the certified result; only attempted when that reaches the threshold.
    function slashDispute(uint256 seed) external {
        ++calls;
        if (block.number < 2) return;
        uint64 ref = uint64(block.number - 1);
        (, address accusedOwner) = _op(seed);
        address accused = registry.signerAt(accusedOwner, ref);
        if (registry.stakeAt(accused, ref) == 0 || registry.slashableStakeOf(accusedOwner) == 0) return;
        uint256 pkBad = pkOf[accused];
        bytes32 task = keccak256(abi.encode("dispute", ++taskNonce));
        ConsensorServiceManager.Attestation memory ce =
            ConsensorServiceManager.Attestation(task, keccak256("good"), bytes32(0), ref);
        ConsensorServiceManager.Attestation memory ac =
            ConsensorServiceManager.Attestation(task, keccak256("bad"), bytes32(0), ref);
        (uint256[] memory chosen, uint256 n) = _certificateSigners(accusedOwner, ref);
        if (n == 0) return;
        bytes[] memory sigs = new bytes[](n);
        for (uint256 i; i < n; ++i) sigs[i] = _sign(chosen[i], ce);
        bytes memory acSig = _sign(pkBad, ac);
        vm.prank(REPORTER);
        uint256 amount = manager.slashDispute(ac, acSig, ce, sigs);
        slashedTotal += amount;
        ++slashes;
        ++disputes;
    }

    /// @dev Keys of the signers (sorted by address) of every owner but `accusedOwner` with stake
    ///      at `ref` that is still slashable; n = 0 when they miss the threshold.
    function _certificateSigners(address accusedOwner, uint64 ref)
        internal
        view
        returns (uint256[] memory chosen, uint256 n)
    {
        chosen = new uint256[](N);
        uint256 signed;
        for (uint256 i; i < N; ++i) {
            address owner = vm.addr(pks[i]);
            if (owner == accusedOwner) continue;
            address s = registry.signerAt(owner, ref);
            uint256 st = registry.stakeAt(s, ref);
            if (st == 0 || registry.slashableStakeOf(owner) == 0) continue;
            chosen[n++] = pkOf[s];
            signed += st;
        }
        if (n == 0 || signed * 10_000 < registry.totalStakeAt(ref) * manager.thresholdBps()) return (chosen, 0);
        for (uint256 i = 1; i < n; ++i) {
            for (uint256 j = i; j > 0 && vm.addr(chosen[j - 1]) > vm.addr(chosen[j]); --j) {
                (chosen[j - 1], chosen[j]) = (chosen[j], chosen[j - 1]);
            }
        }
    }

    function _sign(uint256 pk, ConsensorServiceManager.Attestation memory a) internal view returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) =
            vm.sign(pk, manager.attestationDigest(a.taskId, a.resultRoot, a.traceRoot, a.referenceBlock));
        return abi.encodePacked(r, s, v);
    }

    function operatorCount() external pure returns (uint256) {
        return N;
    }

    function operatorAddress(uint256 i) external view returns (address) {
        return vm.addr(pks[i]);
    }
}

contract InvariantTest is Fixture {
    Handler handler;

    function setUp() public {
        vm.roll(10);
        deployDefault();
        handler = new Handler(registry, manager);
    }

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    /// The registry holds exactly the active stake plus pending withdrawals.
    function invariant_balanceEqualsStakePlusPending() public view {
        assertEq(
            address(registry).balance,
            registry.totalStake() + registry.totalPendingWithdrawals(),
            "registry balance == totalStake + totalPendingWithdrawals"
        );
    }

    /// Conservation of ETH: deposits = registry balance + withdrawals + slashed.
    function invariant_conservation() public view {
        assertEq(
            handler.deposited(),
            address(registry).balance + handler.withdrawn() + handler.slashedTotal(),
            "deposited == balance + withdrawn + slashed"
        );
        assertEq(address(manager).balance, 0, "manager never keeps ETH");
        assertEq(handler.REPORTER().balance + TREASURY.balance, handler.slashedTotal(), "slashed all paid out");
    }

    /// Totals equal the sums over operators; nobody holds more than it deposited minus withdrew;
    /// the checkpointed views agree with the live state.
    function invariant_perOperatorAccounting() public view {
        uint256 sumStake;
        uint256 sumPending;
        for (uint256 i; i < handler.operatorCount(); ++i) {
            address a = handler.operatorAddress(i);
            (NativeStakeRegistry.Status st, bool slashed, uint256 stake, uint256 pending,,) = registry.operatorInfo(a);
            sumStake += stake;
            sumPending += pending;
            assertLe(stake + pending, handler.depositedBy(a) - handler.withdrawnBy(a), "never above deposits");
            // deposited stake is what the owner's checkpoints say once the last deposit activated
            assertEq(registry.ownerStakeAt(a, block.number + ACTIVATION), stake, "checkpoint == live stake");
            assertLe(registry.stakeOf(a), stake, "active <= deposited");
            address signer = registry.signerOf(a);
            if (signer != address(0)) {
                assertEq(registry.ownerOf(signer), a, "signer bound to its owner");
                assertEq(registry.signerAt(a, block.number), signer, "current signer in the history");
                assertEq(registry.stakeAt(signer, block.number + ACTIVATION), stake, "signer-keyed view");
            }
            if (st != NativeStakeRegistry.Status.Active) assertEq(stake, 0, "inactive has no active stake");
            if (st == NativeStakeRegistry.Status.Active) assertGe(stake, registry.minimumStake(), "active >= min");
            if (st == NativeStakeRegistry.Status.None) assertEq(pending, 0, "none has no pending");
            if (slashed) assertTrue(st != NativeStakeRegistry.Status.Active, "slashed never active");
        }
        assertEq(sumStake, registry.totalStake(), "sum stake");
        assertEq(sumPending, registry.totalPendingWithdrawals(), "sum pending");
        // every deposit and every cancellation is dated at most A blocks ahead
        assertEq(registry.totalStakeAt(block.number + ACTIVATION), registry.totalStake(), "total checkpoint");
        (address[] memory signers, uint256[] memory stakes) = registry.operatorsAt(block.number + ACTIVATION);
        uint256 s;
        for (uint256 i; i < stakes.length; ++i) s += stakes[i];
        assertEq(s, registry.totalStake(), "operatorsAt sums to total");
        // now: the total may over-count a deposit cancelled by a slash (never under-count)
        (signers, stakes) = registry.operatorsAt(block.number);
        s = 0;
        for (uint256 i; i < stakes.length; ++i) {
            s += stakes[i];
            assertEq(registry.stakeAt(signers[i], block.number), stakes[i], "operatorsAt lists signers");
        }
        assertLe(s, registry.totalStakeAt(block.number), "total never under-counts");
    }

    function invariant_callSummary() public {
        emit log_named_uint("handler calls", handler.calls());
        emit log_named_uint("slashes", handler.slashes());
        emit log_named_uint("disputes", handler.disputes());
        emit log_named_uint("rotations", handler.rotations());
        emit log_named_uint("slashes of rotated-away signers", handler.oldSignerSlashes());
    }
}
