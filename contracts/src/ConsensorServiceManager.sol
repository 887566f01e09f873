// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IStakeSource} from "./IStakeSource.sol";
import {ReentrancyGuard} from "./ReentrancyGuard.sol";

/// @title ConsensorServiceManager
/// @notice Entry point of the Consensor AVS. Verifies EIP-712 attestations signed by operators
///         and slashes provable misbehaviour:
///           * equivocation: one operator signed two different result roots for one task;
///           * dispute: an operator signed a result root that differs from the one certified by
///             operators holding >= `thresholdBps` of the total stake at the reference block.
///         A slash takes ALL slashable stake of the operator (active + pending withdrawal);
///         `rewardBps` of it goes to the reporter (msg.sender), the rest to `treasury`.
///         Evidence is single-use per (operator, taskId) and expires `evidenceDeadlineBlocks`
///         after its reference block. A certified result is final after `finalityBlock(ref)`.
///         docs/SECURITY.md gives the threat model these parameters answer.
contract ConsensorServiceManager is ReentrancyGuard {
    // ----------------------------------------------------------------------------------------
    // Types and EIP-712 constants
    // ----------------------------------------------------------------------------------------

    /// @notice The signed statement of an operator about a task.
    struct Attestation {
        bytes32 taskId;
        bytes32 resultRoot;
        bytes32 traceRoot;
        uint64 referenceBlock;
    }

    string public constant NAME = "Consensor";
    string public constant VERSION = "1";

    bytes32 public constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 public constant ATTESTATION_TYPEHASH =
        keccak256("Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)");

    uint256 public constant BPS = 10_000;
    /// @dev secp256k1n / 2; signatures with a larger s are rejected (EIP-2).
    uint256 internal constant HALF_CURVE_ORDER =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    // ----------------------------------------------------------------------------------------
    // Immutables and storage
    // ----------------------------------------------------------------------------------------

    /// @notice Where operator stake lives (NativeStakeRegistry, or a restaking adapter).
    IStakeSource public immutable stakeSource;
    /// @notice Stake fraction (basis points of total stake at the reference block) a certificate
    ///         must carry. 5001..10000.
    uint256 public immutable thresholdBps;
    /// @notice Fraction of a slash paid to the reporter, in basis points (0..10000).
    uint256 public immutable rewardBps;
    /// @notice Receives the non-reward part of every slash (a treasury, or a burn address).
    address public immutable treasury;
    /// @notice R: nodes refuse announcements whose reference block is more than this many blocks
    ///         behind their head.
    uint64 public immutable maxReferenceAge;
    /// @notice W: blocks after the last possible announcement in which a certified result can
    ///         still be challenged; it is final after `finalityBlock(ref)`.
    uint64 public immutable challengeWindowBlocks;
    /// @notice E: evidence about reference block `ref` is accepted while block.number <= ref + E.
    ///         E >= R + W, so every result can be challenged through its whole window, and the
    ///         registry's withdrawal delay D exceeds A + W + E (A: its activation delay, >= R),
    ///         so a signer's stake is still there.
    uint64 public immutable evidenceDeadlineBlocks;
    /// @notice The network-wide minimum of replicas a task may ask for (nodes enforce it).
    uint32 public immutable minReplicas;

    uint256 private immutable _cachedChainId;
    bytes32 private immutable _cachedDomainSeparator;

    /// @notice True once the signer `operator` was slashed for `taskId` (by either kind of
    ///         evidence; the stake taken is its owner's).
    mapping(address operator => mapping(bytes32 taskId => bool)) public evidenceUsed;

    // ----------------------------------------------------------------------------------------
    // Events
    // ----------------------------------------------------------------------------------------

    event EquivocationSlashed(
        address indexed operator, bytes32 indexed taskId, uint256 amount, address indexed reporter, uint256 reward
    );
    event DisputeSlashed(
        address indexed operator,
        bytes32 indexed taskId,
        uint256 amount,
        address indexed reporter,
        uint256 reward,
        bytes32 certifiedResultRoot,
        uint256 certifiedStake
    );

    // ----------------------------------------------------------------------------------------
    // Errors
    // ----------------------------------------------------------------------------------------

    error ZeroStakeSource();
    error ZeroTreasury();
    error InvalidThresholdBps(uint256 thresholdBps);
    error InvalidRewardBps(uint256 rewardBps);
    error StakeSourceSlasherMismatch(address expected, address actual);
    error InvalidSignatureLength(uint256 length);
    error InvalidSignatureS();
    error InvalidSignatureV(uint8 v);
    error InvalidSignature();
    error TaskIdMismatch();
    error ReferenceBlockMismatch();
    error SameResultRoot();
    error SignerMismatch(address signer1, address signer2);
    error ReferenceBlockNotFinal(uint256 referenceBlock, uint256 currentBlock);
    error AccusedNotOperatorAtReferenceBlock(address accused);
    error EmptyCertificate();
    error SignersNotAscending(address previous, address signer);
    error SignerNotOperatorAtReferenceBlock(address signer);
    error InsufficientQuorum(uint256 signedStake, uint256 totalStake, uint256 thresholdBps);
    error EvidenceAlreadyUsed(address operator, bytes32 taskId);
    error NothingToSlash(address operator);
    error UnexpectedEther(address sender);
    error InvalidTimeParameters(uint64 maxReferenceAge, uint64 challengeWindowBlocks, uint64 evidenceDeadlineBlocks);
    error WithdrawalDelayTooShort(uint256 withdrawalDelayBlocks, uint256 needed);
    error ActivationDelayTooShort(uint256 activationDelayBlocks, uint256 needed);
    error InvalidMinReplicas();
    error EvidenceExpired(uint256 referenceBlock, uint256 deadline);
    error SignerAlreadySlashedForTask(address signer, bytes32 taskId);
    error SignerNoLongerSlashable(address signer);
    error TransferFailed(address to, uint256 amount);


    /// @notice The deployment's time parameters and replication floor (docs/SECURITY.md).
    struct Params {
        uint64 maxReferenceAge;
        uint64 challengeWindowBlocks;
        uint64 evidenceDeadlineBlocks;
        uint32 minReplicas;
    }

    constructor(
        IStakeSource stakeSource_,
        uint256 thresholdBps_,
        uint256 rewardBps_,
        address treasury_,
        Params memory params_
    ) {
        if (address(stakeSource_) == address(0)) revert ZeroStakeSource();
        if (treasury_ == address(0)) revert ZeroTreasury();
        if (thresholdBps_ <= BPS / 2 || thresholdBps_ > BPS) revert InvalidThresholdBps(thresholdBps_);
        if (rewardBps_ > BPS) revert InvalidRewardBps(rewardBps_);
        address s = stakeSource_.slasher();
        if (s != address(this)) revert StakeSourceSlasherMismatch(address(this), s);
        uint64 r = params_.maxReferenceAge;
        uint64 w = params_.challengeWindowBlocks;
        uint64 e = params_.evidenceDeadlineBlocks;
        // Evidence must still be accepted in the window's last block, ref + R + 1 + W.
        if (r == 0 || w == 0 || r > type(uint32).max || w > type(uint32).max || e < uint256(r) + 1 + w) {
            revert InvalidTimeParameters(r, w, e);
        }
        // Flash stake: a deposit must have been visible for R blocks before any announcement
        // can reference a block at which it counts.
        uint256 activation = stakeSource_.activationDelayBlocks();
        if (activation < r) revert ActivationDelayTooShort(activation, r);
        // A signer's stake must outlive the evidence against it: exiting right after signing
        // (at the earliest, A blocks after the deposit) still leaves it slashable until every
        // deadline about that signature has passed.
        uint256 delay = stakeSource_.withdrawalDelayBlocks();
        uint256 needed = activation + w + e + 1;
        if (delay < needed) revert WithdrawalDelayTooShort(delay, needed);
        if (params_.minReplicas == 0) revert InvalidMinReplicas();
        maxReferenceAge = r;
        challengeWindowBlocks = w;
        evidenceDeadlineBlocks = e;
        minReplicas = params_.minReplicas;
        stakeSource = stakeSource_;
        thresholdBps = thresholdBps_;
        rewardBps = rewardBps_;
        treasury = treasury_;
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
    }

    /// @notice Only the stake source sends ETH here (the proceeds of a slash).
    receive() external payable {
        if (msg.sender != address(stakeSource)) revert UnexpectedEther(msg.sender);
    }

    // ----------------------------------------------------------------------------------------
    // EIP-712
    // ----------------------------------------------------------------------------------------

    /// @notice keccak256(abi.encode(DOMAIN_TYPEHASH, keccak256("Consensor"), keccak256("1"),
    ///         block.chainid, address(this))).
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == _cachedChainId ? _cachedDomainSeparator : _buildDomainSeparator();
    }

    /// @notice keccak256(0x1901 || domainSeparator || hashStruct(Attestation)).
    function attestationDigest(bytes32 taskId, bytes32 resultRoot, bytes32 traceRoot, uint64 referenceBlock)
        public
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(abi.encode(ATTESTATION_TYPEHASH, taskId, resultRoot, traceRoot, referenceBlock));
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    /// @notice Signer of `a` given a 65-byte r||s||v signature; reverts on any malformed signature.
    function recoverAttestationSigner(Attestation calldata a, bytes calldata signature)
        external
        view
        returns (address)
    {
        return _recover(_digest(a), signature);
    }

    // ----------------------------------------------------------------------------------------
    // Finality
    // ----------------------------------------------------------------------------------------

    /// @notice The last block of the challenge window of a result certified at `referenceBlock`:
    ///         nodes accept its announcement until ref + R, its committee is drawn from the hash
    ///         of block ref + R + 1, and anyone may challenge it for W blocks after that. The
    ///         result is final once block.number > finalityBlock(ref).
    function finalityBlock(uint64 referenceBlock) public view returns (uint256) {
        return uint256(referenceBlock) + maxReferenceAge + 1 + challengeWindowBlocks;
    }

    /// @notice True once the result certified at `referenceBlock` can no longer be challenged.
    function isFinal(uint64 referenceBlock) external view returns (bool) {
        return block.number > finalityBlock(referenceBlock);
    }

    // ----------------------------------------------------------------------------------------
    // Certificates
    // ----------------------------------------------------------------------------------------

    /// @notice Checks a certificate over `certified` exactly as `slashDispute` does and returns
    ///         the stake behind it, so anyone can verify a result off-chain with one eth_call.
    ///         Reverts with the same errors for a malformed certificate (empty, bad signature,
    ///         signers not strictly ascending, a signer without stake at the reference block) and
    ///         for a reference block that is not final; a quorum short of `thresholdBps` is not an
    ///         error here but `meetsThreshold == false`.
    function verifyCertificate(Attestation calldata certified, bytes[] calldata certificateSigs)
        external
        view
        returns (uint256 signedStake, uint256 totalStake, bool meetsThreshold)
    {
        uint256 ref = certified.referenceBlock;
        // Stake at the current or a future block can still change, so it certifies nothing.
        if (ref >= block.number) revert ReferenceBlockNotFinal(ref, block.number);
        (signedStake, totalStake) = _certificateStake(certified, certificateSigs);
        meetsThreshold = _meetsThreshold(signedStake, totalStake);
    }

    // ----------------------------------------------------------------------------------------
    // Slashing
    // ----------------------------------------------------------------------------------------

    /// @notice Slash an operator that signed two attestations for the same task with different
    ///         result roots. The signer must have been its owner's signer with active stake at
    ///         both reference blocks; the owner's stake is taken. Permissionless; the caller
    ///         receives the reward.
    function slashEquivocation(
        Attestation calldata a1,
        bytes calldata sig1,
        Attestation calldata a2,
        bytes calldata sig2
    ) external nonReentrant returns (uint256 amount) {
        if (a1.taskId != a2.taskId) revert TaskIdMismatch();
        if (a1.resultRoot == a2.resultRoot) revert SameResultRoot();
        _checkDeadline(a1.referenceBlock);
        _checkDeadline(a2.referenceBlock);
        address s1 = _recover(_digest(a1), sig1);
        address s2 = _recover(_digest(a2), sig2);
        if (s1 != s2) revert SignerMismatch(s1, s2);
        address owner = _equivocatingOwner(s1, a1.referenceBlock, a2.referenceBlock);

        uint256 reward;
        (amount, reward) = _slash(s1, owner, a1.taskId);
        emit EquivocationSlashed(s1, a1.taskId, amount, msg.sender, reward);
        _payout(reward, amount - reward);
    }

    /// @notice Slash an operator whose attestation contradicts a quorum certificate for the same
    ///         task and reference block. `certificateSigs` are signatures over `certified` whose
    ///         recovered signers must be strictly ascending by address, each with stake > 0 at the
    ///         reference block, together holding >= thresholdBps of the total stake at that block.
    ///         Permissionless; the caller receives the reward.
    function slashDispute(
        Attestation calldata accused,
        bytes calldata accusedSig,
        Attestation calldata certified,
        bytes[] calldata certificateSigs
    ) external nonReentrant returns (uint256 amount) {
        if (accused.taskId != certified.taskId) revert TaskIdMismatch();
        if (accused.referenceBlock != certified.referenceBlock) revert ReferenceBlockMismatch();
        if (accused.resultRoot == certified.resultRoot) revert SameResultRoot();
        uint256 ref = certified.referenceBlock;
        if (ref >= block.number) revert ReferenceBlockNotFinal(ref, block.number);
        _checkDeadline(certified.referenceBlock);

        address operator = _recover(_digest(accused), accusedSig);
        (address owner, uint256 accusedStake) = stakeSource.signerStakeAt(operator, ref);
        if (accusedStake == 0) revert AccusedNotOperatorAtReferenceBlock(operator);
        uint256 signedStake = _verifyCertificate(certified, certificateSigs);

        uint256 reward;
        (amount, reward) = _slash(operator, owner, accused.taskId);
        emit DisputeSlashed(operator, accused.taskId, amount, msg.sender, reward, certified.resultRoot, signedStake);
        _payout(reward, amount - reward);
    }

    // ----------------------------------------------------------------------------------------
    // Internals
    // ----------------------------------------------------------------------------------------

    /// @dev The owner that answers for two statements `signer` made about `ref1` and `ref2`.
    ///      Both must have been made while `signer` was its owner's signer with active stake: a
    ///      rotated-away (possibly stolen) key cannot hurt the owner about later blocks, and the
    ///      owner cannot escape the signatures it made before the rotation (a signer is bound to
    ///      one owner forever, so both lookups name the same owner).
    function _equivocatingOwner(address signer, uint64 ref1, uint64 ref2) internal view returns (address owner) {
        uint256 stake;
        (owner, stake) = stakeSource.signerStakeAt(signer, ref1);
        if (stake == 0) revert AccusedNotOperatorAtReferenceBlock(signer);
        (, stake) = stakeSource.signerStakeAt(signer, ref2);
        if (stake == 0) revert AccusedNotOperatorAtReferenceBlock(signer);
    }

    /// @dev Evidence about `referenceBlock` expires E blocks after it.
    function _checkDeadline(uint64 referenceBlock) internal view {
        uint256 deadline = uint256(referenceBlock) + evidenceDeadlineBlocks;
        if (block.number > deadline) revert EvidenceExpired(referenceBlock, deadline);
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(DOMAIN_TYPEHASH, keccak256(bytes(NAME)), keccak256(bytes(VERSION)), block.chainid, address(this))
        );
    }

    function _digest(Attestation calldata a) internal view returns (bytes32) {
        return attestationDigest(a.taskId, a.resultRoot, a.traceRoot, a.referenceBlock);
    }

    /// @dev Returns the stake behind a valid certificate over `certified` that reaches the
    ///      threshold; reverts otherwise.
    function _verifyCertificate(Attestation calldata certified, bytes[] calldata sigs)
        internal
        view
        returns (uint256 signedStake)
    {
        uint256 total;
        (signedStake, total) = _certificateStake(certified, sigs);
        if (!_meetsThreshold(signedStake, total)) revert InsufficientQuorum(signedStake, total, thresholdBps);
    }

    function _meetsThreshold(uint256 signedStake, uint256 total) internal view returns (bool) {
        return signedStake * BPS >= total * thresholdBps;
    }

    /// @dev The stake of a certificate's signers and the total stake at its reference block.
    ///      Reverts for an empty certificate, an invalid signature, signers that are not strictly
    ///      ascending, or a signer without stake at the reference block; the quorum is the
    ///      caller's decision.
    function _certificateStake(Attestation calldata certified, bytes[] calldata sigs)
        internal
        view
        returns (uint256 signedStake, uint256 total)
    {
        uint256 n = sigs.length;
        if (n == 0) revert EmptyCertificate();
        IStakeSource source = stakeSource;
        uint256 ref = certified.referenceBlock;
        bytes32 certDigest = _digest(certified);
        address previous = address(0);
        for (uint256 i; i < n; ++i) {
            address signer = _recover(certDigest, sigs[i]);
            if (signer <= previous) revert SignersNotAscending(previous, signer);
            (, uint256 s, uint256 slashable) = source.certificateSignerAt(signer, ref);
            if (s == 0) revert SignerNotOperatorAtReferenceBlock(signer);
            // Stake that backs a certificate must still be at risk: a signer slashed for this
            // task, or one whose owner's stake is gone, backs nothing.
            if (evidenceUsed[signer][certified.taskId]) revert SignerAlreadySlashedForTask(signer, certified.taskId);
            if (slashable == 0) revert SignerNoLongerSlashable(signer);
            signedStake += s;
            previous = signer;
        }
        total = source.totalStakeAt(ref);
    }

    /// @dev 65 bytes r||s||v, v in {27, 28}, s <= secp256k1n/2, recovered address != 0.
    function _recover(bytes32 digest, bytes calldata sig) internal pure returns (address signer) {
        if (sig.length != 65) revert InvalidSignatureLength(sig.length);
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly ("memory-safe") {
            r := calldataload(sig.offset)
            s := calldataload(add(sig.offset, 32))
            v := byte(0, calldataload(add(sig.offset, 64)))
        }
        if (uint256(s) > HALF_CURVE_ORDER) revert InvalidSignatureS();
        if (v != 27 && v != 28) revert InvalidSignatureV(v);
        signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
    }

    /// @dev Effects + the stake-source interaction (which sends the slashed ETH here).
    ///      `signer` made the statement; its `owner` (at the statement's reference block) pays.
    function _slash(address signer, address owner, bytes32 taskId) internal returns (uint256 amount, uint256 reward) {
        if (evidenceUsed[signer][taskId]) revert EvidenceAlreadyUsed(signer, taskId);
        evidenceUsed[signer][taskId] = true;
        amount = stakeSource.slash(owner, type(uint256).max);
        if (amount == 0) revert NothingToSlash(signer);
        reward = amount * rewardBps / BPS;
    }

    function _payout(uint256 reward, uint256 toTreasury) internal {
        _send(msg.sender, reward);
        _send(treasury, toTreasury);
    }

    function _send(address to, uint256 amount) internal {
        if (amount == 0) return;
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
