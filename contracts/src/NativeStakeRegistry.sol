// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IStakeSource} from "./IStakeSource.sol";
import {ReentrancyGuard} from "./ReentrancyGuard.sol";

/// @title NativeStakeRegistry
/// @notice Operator registry of the Consensor AVS, staked in native ETH.
///         Two keys per operator (docs/CONTRACTS.md, "Owner and signer"):
///           * the OWNER (cold key, msg.sender of register) deposits, adds stake, rotates the
///             signer, deregisters and is the only address `withdraw` pays;
///           * the SIGNER (hot key, the node's key) only signs attestations. Certificates and
///             slashing look stake up by the signer an attestation recovers to, at its
///             reference block, through a per-block history of each owner's signer.
///         Binding a signer other than the owner needs the signer's proof of possession: its
///         signature over `signerBindingDigest(owner, signer)`. Without it, anyone could bind
///         a node's address first and have that node's signatures count as its own stake.
///         A signer is bound to one owner forever (never reused after a rotation), and an owner
///         address is never another owner's signer, so signer -> owner is unambiguous at every
///         block: a rotation neither frees the old signer's signatures from slashing nor makes
///         the new key answer for signatures it did not make.
///         Stake deposited at block b counts from block b + activationDelayBlocks (A) on
///         (future-dated checkpoints), so stake that was not visible for A >= R blocks can back
///         no certificate and no dispute ("flash stake", docs/SECURITY.md). An operator has at
///         most one deposit waiting to activate; it may add stake or deregister only once it is
///         active. Deregistering moves the stake into a pending withdrawal that stays slashable
///         for `withdrawalDelayBlocks` blocks; after that the owner withdraws it.
contract NativeStakeRegistry is IStakeSource, ReentrancyGuard {
    // ----------------------------------------------------------------------------------------
    // Types
    // ----------------------------------------------------------------------------------------

    enum Status {
        None, // never registered, or withdrew everything
        Active, // registered, stake counts for committees (once activated)
        Exiting // deregistered (or ejected by a slash); pending withdrawal still slashable
    }

    struct Checkpoint {
        uint32 blockNumber;
        uint224 stake;
    }

    /// @dev `signer` is the owner's signer from the end of block `fromBlock` on.
    struct SignerCheckpoint {
        uint32 fromBlock;
        address signer;
    }

    struct Operator {
        Status status;
        bool slashed; // ever slashed: may never register or add stake again
        uint32 withdrawableAtBlock; // first block at which `withdraw` succeeds (when Exiting)
        address signer; // current signer (the last entry of the signer history)
        uint32 signerFromBlock; // ... and its first block (slot 0 holds both: a one-read fast path)
        uint256 stake; // deposited stake: active, or waiting for its activation block
        uint256 pendingWithdrawal; // stake waiting out the delay (slashable)
        string endpoint; // gRPC endpoint, e.g. "node1.example.org:7000"
    }

    // ----------------------------------------------------------------------------------------
    // Constants, immutables, storage
    // ----------------------------------------------------------------------------------------

    /// @notice Maximum length in bytes of an operator's gRPC endpoint string.
    uint256 public constant MAX_ENDPOINT_LENGTH = 256;
    /// @notice Domain tag of a signer's proof of possession (see `signerBindingDigest`).
    bytes32 public constant SIGNER_BINDING_TAG = keccak256("consensor.signer-binding.v1");
    uint256 internal constant HALF_CURVE_ORDER =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    /// @notice Minimum stake (wei) to register.
    uint256 public immutable minimumStake;
    /// @notice Blocks between deregistration and the earliest withdrawal.
    uint32 public immutable override withdrawalDelayBlocks;
    /// @notice A: stake deposited at block b counts from block b + A on.
    uint32 public immutable override activationDelayBlocks;
    /// @inheritdoc IStakeSource
    address public immutable slasher;

    mapping(address owner => Operator) internal _operators;
    /// @dev Per owner; ascending; at most the last entry lies in the future (a deposit waiting
    ///      for its activation block).
    mapping(address owner => Checkpoint[]) internal _stakeHistory;
    mapping(address owner => SignerCheckpoint[]) internal _signerHistory;
    /// @dev The one owner a signer was ever bound to (0: never bound).
    mapping(address signer => address owner) internal _signerOwner;
    /// @dev totalStakeAt(b) = cumulative(_totalIn, b) - cumulative(_totalOut, b). Both are
    ///      append-only: _totalIn takes deposits at their activation block (block.number + A,
    ///      never decreasing), _totalOut takes exits at block.number.
    Checkpoint[] internal _totalIn;
    Checkpoint[] internal _totalOut;
    address[] internal _allOperators; // every owner that ever registered, in order of first registration
    mapping(address => bool) internal _known;

    /// @notice Sum of deposited stake of all active operators (including deposits that are not
    ///         active yet; `totalStakeAt` counts only active stake).
    uint256 public totalStake;
    /// @notice Sum of all pending withdrawals.
    uint256 public totalPendingWithdrawals;

    // ----------------------------------------------------------------------------------------
    // Events
    // ----------------------------------------------------------------------------------------

    event OperatorRegistered(
        address indexed owner, address indexed signer, uint256 stake, uint256 activatesAtBlock, string endpoint
    );
    event StakeAdded(address indexed owner, uint256 amount, uint256 newStake, uint256 activatesAtBlock);
    event SignerRotated(address indexed owner, address indexed oldSigner, address indexed newSigner, uint256 fromBlock);
    event EndpointUpdated(address indexed owner, string endpoint);
    event OperatorDeregistered(address indexed owner, uint256 pendingWithdrawal, uint256 withdrawableAtBlock);
    event StakeWithdrawn(address indexed owner, uint256 amount);
    event OperatorSlashed(address indexed owner, uint256 amount, address indexed slasher);

    // ----------------------------------------------------------------------------------------
    // Errors
    // ----------------------------------------------------------------------------------------

    error ZeroMinimumStake();
    error ZeroSlasher();
    error AlreadyRegistered(address operator);
    error NotActive(address operator);
    error NotExiting(address operator);
    error NotRegistered(address operator);
    error OperatorWasSlashed(address operator);
    error StakeBelowMinimum(uint256 provided, uint256 minimum);
    error ZeroAmount();
    error EmptyEndpoint();
    error EndpointTooLong(uint256 length, uint256 maxLength);
    error WithdrawalDelayNotPassed(uint256 currentBlock, uint256 withdrawableAtBlock);
    error OnlySlasher(address caller);
    error StakeOverflow();
    error BlockNumberOverflow();
    error TransferFailed(address to, uint256 amount);
    error ZeroSigner();
    error SignerAlreadyBound(address signer, address owner);
    error SignerIsAnOwner(address signer);
    error OwnerIsASigner(address owner);
    error StakePendingActivation(uint256 activatesAtBlock);
    error SignerProofInvalid(address signer);

    /// @param minimumStake_ minimum stake in wei (> 0)
    /// @param withdrawalDelayBlocks_ withdrawal delay D in blocks (the service manager requires
    ///        D > A + W + E)
    /// @param activationDelayBlocks_ activation delay A in blocks (the service manager requires
    ///        A >= R; 0 makes a deposit count in the block it arrives in)
    /// @param slasher_ the service manager allowed to slash (its address can be precomputed)
    constructor(uint256 minimumStake_, uint32 withdrawalDelayBlocks_, uint32 activationDelayBlocks_, address slasher_) {
        if (minimumStake_ == 0) revert ZeroMinimumStake();
        if (slasher_ == address(0)) revert ZeroSlasher();
        if (minimumStake_ > type(uint224).max) revert StakeOverflow();
        minimumStake = minimumStake_;
        withdrawalDelayBlocks = withdrawalDelayBlocks_;
        activationDelayBlocks = activationDelayBlocks_;
        slasher = slasher_;
    }

    // ----------------------------------------------------------------------------------------
    // Owner actions (msg.sender is the owner)
    // ----------------------------------------------------------------------------------------

    /// @notice Register msg.sender as an operator that signs with its own key (signer = owner),
    ///         with `msg.value` stake, active from block.number + A.
    function register(string calldata endpoint) external payable {
        _register(msg.sender, endpoint, "");
    }

    /// @notice Register msg.sender as the owner of an operator whose attestations `signer`
    ///         signs, with `msg.value` stake, active from block.number + A. `signer` must never
    ///         have been bound to another owner nor registered as an owner itself (it may be
    ///         msg.sender, or msg.sender's current signer when it registers again).
    /// @param signerProof the signer's 65-byte signature (r||s||v) over
    ///        `signerBindingDigest(msg.sender, signer)`; ignored when no new binding is made
    ///        (signer == msg.sender, or msg.sender's current signer)
    function register(address signer, string calldata endpoint, bytes calldata signerProof) external payable {
        _register(signer, endpoint, signerProof);
    }

    /// @notice Add `msg.value` to the stake of msg.sender, active from block.number + A. Reverts
    ///         while an earlier deposit is still waiting for its activation block.
    function addStake() external payable {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Active) revert NotActive(msg.sender);
        if (msg.value == 0) revert ZeroAmount();
        _requireNothingPending(msg.sender);
        op.stake += msg.value;
        totalStake += msg.value;
        uint256 activatesAt = _deposit(msg.sender, op.stake, msg.value);
        emit StakeAdded(msg.sender, msg.value, op.stake, activatesAt);
    }

    /// @notice Make `newSigner` msg.sender's signer from the end of this block on. The old
    ///         signer's attestations about earlier reference blocks stay bound to msg.sender (and
    ///         slashable until their evidence deadline); it is never anybody's signer again.
    /// @param signerProof `newSigner`'s signature over `signerBindingDigest(msg.sender, newSigner)`
    function rotateSigner(address newSigner, bytes calldata signerProof) external {
        Operator storage op = _operators[msg.sender];
        if (op.status == Status.None) revert NotRegistered(msg.sender);
        address old = op.signer;
        _bindSigner(msg.sender, op, newSigner, signerProof);
        emit SignerRotated(msg.sender, old, newSigner, block.number);
    }

    /// @notice Change the announced gRPC endpoint of msg.sender.
    function updateEndpoint(string calldata endpoint) external {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Active) revert NotActive(msg.sender);
        _checkEndpoint(endpoint);
        op.endpoint = endpoint;
        emit EndpointUpdated(msg.sender, endpoint);
    }

    /// @notice Leave the active set. The whole stake becomes a pending withdrawal, still slashable,
    ///         withdrawable from block `block.number + withdrawalDelayBlocks`. Reverts while a
    ///         deposit is still waiting for its activation block.
    function deregister() external {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Active) revert NotActive(msg.sender);
        _requireNothingPending(msg.sender);
        _exit(msg.sender, op);
    }

    /// @notice Withdraw the pending withdrawal once the delay has passed; pays the owner only.
    function withdraw() external nonReentrant {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Exiting) revert NotExiting(msg.sender);
        if (block.number < op.withdrawableAtBlock) {
            revert WithdrawalDelayNotPassed(block.number, op.withdrawableAtBlock);
        }
        uint256 amount = op.pendingWithdrawal;
        op.pendingWithdrawal = 0;
        op.withdrawableAtBlock = 0;
        op.status = Status.None;
        totalPendingWithdrawals -= amount;
        emit StakeWithdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    // ----------------------------------------------------------------------------------------
    // Slashing hook
    // ----------------------------------------------------------------------------------------

    /// @inheritdoc IStakeSource
    /// @dev Takes from the stake first (active or waiting to activate), then from the pending
    ///      withdrawal. The operator is marked slashed (never re-registers) and, if still active,
    ///      ejected: any remainder becomes a pending withdrawal with a fresh delay.
    function slash(address owner, uint256 amount) external nonReentrant returns (uint256 slashed) {
        if (msg.sender != slasher) revert OnlySlasher(msg.sender);
        if (amount == 0) return 0;
        Operator storage op = _operators[owner];
        if (op.status == Status.Active) _exit(owner, op);
        // after _exit all slashable value is in pendingWithdrawal
        uint256 pending = op.pendingWithdrawal;
        slashed = amount < pending ? amount : pending;
        if (slashed == 0) return 0;
        op.slashed = true;
        op.pendingWithdrawal = pending - slashed;
        totalPendingWithdrawals -= slashed;
        if (op.pendingWithdrawal == 0) {
            op.status = Status.None;
            op.withdrawableAtBlock = 0;
        }
        emit OperatorSlashed(owner, slashed, msg.sender);
        _send(msg.sender, slashed);
    }

    // ----------------------------------------------------------------------------------------
    // Views
    // ----------------------------------------------------------------------------------------

    /// @inheritdoc IStakeSource
    function stakeOf(address owner) external view returns (uint256) {
        return _lookup(_stakeHistory[owner], block.number);
    }

    /// @inheritdoc IStakeSource
    function slashableStakeOf(address owner) external view returns (uint256) {
        Operator storage op = _operators[owner];
        return op.stake + op.pendingWithdrawal;
    }

    /// @inheritdoc IStakeSource
    function stakeAt(address signer, uint256 blockNumber) external view returns (uint256 stake) {
        (, stake) = signerStakeAt(signer, blockNumber);
    }

    /// @inheritdoc IStakeSource
    function signerStakeAt(address signer, uint256 blockNumber) public view returns (address owner, uint256 stake) {
        owner = _signerOwner[signer];
        if (owner == address(0) || signerAt(owner, blockNumber) != signer) return (address(0), 0);
        stake = _lookup(_stakeHistory[owner], blockNumber);
    }

    /// @inheritdoc IStakeSource
    function certificateSignerAt(address signer, uint256 blockNumber)
        external
        view
        returns (address owner, uint256 stake, uint256 slashable)
    {
        (owner, stake) = signerStakeAt(signer, blockNumber);
        if (owner != address(0)) {
            Operator storage op = _operators[owner];
            slashable = op.stake + op.pendingWithdrawal;
        }
    }

    /// @notice Active stake of the operator `owner` at the end of block `blockNumber`, whoever
    ///         its signer was.
    function ownerStakeAt(address owner, uint256 blockNumber) external view returns (uint256) {
        return _lookup(_stakeHistory[owner], blockNumber);
    }

    /// @notice The signer of `owner` at the end of block `blockNumber` (0 before it registered).
    function signerAt(address owner, uint256 blockNumber) public view returns (address) {
        Operator storage op = _operators[owner];
        // Fast path: the current signer (the history's last entry) from its first block on.
        address current = op.signer;
        if (current == address(0)) return address(0);
        if (op.signerFromBlock <= blockNumber) return current;
        SignerCheckpoint[] storage h = _signerHistory[owner];
        uint256 hi = h.length;
        uint256 lo = 0;
        while (lo < hi) {
            uint256 mid = (lo + hi) >> 1;
            if (h[mid].fromBlock > blockNumber) hi = mid;
            else lo = mid + 1;
        }
        return lo == 0 ? address(0) : h[lo - 1].signer;
    }

    /// @notice The current signer of `owner` (0 if it never registered).
    function signerOf(address owner) external view returns (address) {
        return _operators[owner].signer;
    }

    /// @notice The owner `signer` is bound to, forever (0 if it never was a signer).
    function ownerOf(address signer) external view returns (address) {
        return _signerOwner[signer];
    }

    /// @notice Number of signer changes of `owner` (registration included).
    function signerCheckpointCount(address owner) external view returns (uint256) {
        return _signerHistory[owner].length;
    }

    /// @notice The `index`-th signer checkpoint of `owner`: (first block, signer).
    function signerCheckpoint(address owner, uint256 index) external view returns (uint32, address) {
        SignerCheckpoint storage c = _signerHistory[owner][index];
        return (c.fromBlock, c.signer);
    }

    /// @inheritdoc IStakeSource
    function totalStakeAt(uint256 blockNumber) external view returns (uint256) {
        return _lookup(_totalIn, blockNumber) - _lookup(_totalOut, blockNumber);
    }

    /// @notice The operator set at the end of block `blockNumber`: for every owner ever registered
    ///         whose active stake at that block is > 0, in order of first registration, its
    ///         SIGNER at that block (the address its attestations recover to) and its stake.
    ///         Every node derives the committee from this list for a given reference block.
    ///         Its cost grows with every owner that ever registered (about 8,700 gas each), so a
    ///         long history can exceed an RPC node's eth_call gas cap: nodes read it in pages
    ///         with `operatorsAtPage`, which lists the same operators in the same order.
    function operatorsAt(uint256 blockNumber)
        external
        view
        returns (address[] memory operators, uint256[] memory stakes)
    {
        (operators, stakes) = _operatorsIn(blockNumber, 0, _allOperators.length);
    }

    /// @notice One page of `operatorsAt(blockNumber)`: the owners with registration index in
    ///         [start, start + maxCount) that have stake at that block, as (signer, stake) in
    ///         registration order. `next` is where the following page starts and `total` the
    ///         number of owners ever registered; concatenating pages from start 0 until
    ///         `next == total` gives exactly `operatorsAt(blockNumber)`. Owners registered later
    ///         only append, and have no stake at a block that is already final, so a reader may
    ///         fetch the pages across several blocks.
    function operatorsAtPage(uint256 blockNumber, uint256 start, uint256 maxCount)
        external
        view
        returns (address[] memory operators, uint256[] memory stakes, uint256 next, uint256 total)
    {
        total = _allOperators.length;
        next = start >= total ? total : (maxCount >= total - start ? total : start + maxCount);
        if (start < next) (operators, stakes) = _operatorsIn(blockNumber, start, next);
    }

    /// @dev The operators with stake at `blockNumber` among registration indices [from, to).
    function _operatorsIn(uint256 blockNumber, uint256 from, uint256 to)
        internal
        view
        returns (address[] memory operators, uint256[] memory stakes)
    {
        operators = new address[](to - from);
        stakes = new uint256[](to - from);
        uint256 count;
        for (uint256 i = from; i < to; ++i) {
            address owner = _allOperators[i];
            uint256 s = _lookup(_stakeHistory[owner], blockNumber);
            if (s > 0) {
                operators[count] = signerAt(owner, blockNumber);
                stakes[count] = s;
                ++count;
            }
        }
        assembly ("memory-safe") {
            mstore(operators, count)
            mstore(stakes, count)
        }
    }

    /// @notice Number of owners that ever registered.
    function operatorCount() external view returns (uint256) {
        return _allOperators.length;
    }

    /// @notice The `index`-th owner that ever registered.
    function operatorAtIndex(uint256 index) external view returns (address) {
        return _allOperators[index];
    }

    /// @notice Full record of the operator `account` names: `account` is its owner, or a signer
    ///         ever bound to it (so a node can look itself up by its signing key). `stake` is the
    ///         deposited stake (active or waiting to activate; `stakeOf` is the active part).
    function operatorInfo(address account)
        external
        view
        returns (
            Status status,
            bool slashed,
            uint256 stake,
            uint256 pendingWithdrawal,
            uint256 withdrawableAtBlock,
            string memory endpoint
        )
    {
        Operator storage op = _operators[_resolve(account)];
        return (op.status, op.slashed, op.stake, op.pendingWithdrawal, op.withdrawableAtBlock, op.endpoint);
    }

    /// @notice Announced gRPC endpoint of the operator `account` (owner or signer) names (kept
    ///         after deregistration).
    function endpointOf(address account) external view returns (string memory) {
        return _operators[_resolve(account)].endpoint;
    }

    /// @notice First block from which the deposited stake of `owner` is all active (a past or
    ///         the current block when nothing waits for activation).
    function activationBlockOf(address owner) external view returns (uint256) {
        Checkpoint[] storage h = _stakeHistory[owner];
        return h.length == 0 ? 0 : h[h.length - 1].blockNumber;
    }

    /// @notice Number of stake checkpoints of `owner`.
    function stakeCheckpointCount(address owner) external view returns (uint256) {
        return _stakeHistory[owner].length;
    }

    /// @notice The `index`-th stake checkpoint of `owner`.
    function stakeCheckpoint(address owner, uint256 index) external view returns (uint32, uint224) {
        Checkpoint storage c = _stakeHistory[owner][index];
        return (c.blockNumber, c.stake);
    }

    /// @notice Number of checkpoints of the total (deposits in, exits out).
    function totalStakeCheckpointCount() external view returns (uint256 deposits, uint256 exits) {
        return (_totalIn.length, _totalOut.length);
    }

    /// @notice What `signer` signs (raw, no message prefix) to let `owner` bind it: the tag,
    ///         this chain and this registry, so a proof serves one binding on one deployment.
    function signerBindingDigest(address owner, address signer) public view returns (bytes32) {
        return keccak256(abi.encode(SIGNER_BINDING_TAG, block.chainid, address(this), owner, signer));
    }

    // ----------------------------------------------------------------------------------------
    // Internals
    // ----------------------------------------------------------------------------------------

    /// @dev The address that made the 65-byte r||s||v `proof` over `digest`; 0 for any proof
    ///      that is malformed, has a high s or a bad v (the caller reports which signer failed).
    function _recoverProof(bytes32 digest, bytes memory proof) internal pure returns (address) {
        if (proof.length != 65) return address(0);
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly ("memory-safe") {
            r := mload(add(proof, 32))
            s := mload(add(proof, 64))
            v := byte(0, mload(add(proof, 96)))
        }
        if (uint256(s) > HALF_CURVE_ORDER || (v != 27 && v != 28)) return address(0);
        return ecrecover(digest, v, r, s);
    }

    function _register(address signer, string calldata endpoint, bytes memory signerProof) internal {
        address owner = msg.sender;
        Operator storage op = _operators[owner];
        if (op.slashed) revert OperatorWasSlashed(owner);
        if (op.status != Status.None) revert AlreadyRegistered(owner);
        if (msg.value < minimumStake) revert StakeBelowMinimum(msg.value, minimumStake);
        _checkEndpoint(endpoint);
        address boundTo = _signerOwner[owner];
        if (boundTo != address(0) && boundTo != owner) revert OwnerIsASigner(owner);
        // Registering again with the current signer keeps it; any other signer is a new binding.
        if (signer != op.signer || signer == address(0)) _bindSigner(owner, op, signer, signerProof);

        op.status = Status.Active;
        op.stake = msg.value;
        op.endpoint = endpoint;
        if (!_known[owner]) {
            _known[owner] = true;
            _allOperators.push(owner);
        }
        totalStake += msg.value;
        uint256 activatesAt = _deposit(owner, msg.value, msg.value);
        emit OperatorRegistered(owner, signer, msg.value, activatesAt, endpoint);
    }

    /// @dev Binds the never-used `signer` to `owner` from the end of this block on. A signer
    ///      other than the owner must prove it holds its key (`signerProof`).
    function _bindSigner(address owner, Operator storage op, address signer, bytes memory signerProof) internal {
        if (signer == address(0)) revert ZeroSigner();
        address boundTo = _signerOwner[signer];
        if (boundTo != address(0)) revert SignerAlreadyBound(signer, boundTo);
        if (signer != owner) {
            if (_known[signer]) revert SignerIsAnOwner(signer);
            if (_recoverProof(signerBindingDigest(owner, signer), signerProof) != signer) {
                revert SignerProofInvalid(signer);
            }
        }
        if (block.number > type(uint32).max) revert BlockNumberOverflow();
        _signerOwner[signer] = owner;
        op.signer = signer;
        op.signerFromBlock = uint32(block.number);
        SignerCheckpoint[] storage h = _signerHistory[owner];
        uint256 len = h.length;
        if (len > 0 && h[len - 1].fromBlock == block.number) {
            // The replaced signer was never the signer at the end of any block: it backs
            // nothing and answers for nothing, and stays bound so it is never reused.
            h[len - 1].signer = signer;
        } else {
            h.push(SignerCheckpoint({fromBlock: uint32(block.number), signer: signer}));
        }
    }

    /// @dev Dates `newStake` of `owner` (after a deposit of `amount`) at block.number + A.
    function _deposit(address owner, uint256 newStake, uint256 amount) internal returns (uint256 activatesAt) {
        activatesAt = block.number + activationDelayBlocks;
        _pushAt(_stakeHistory[owner], activatesAt, newStake);
        _pushAt(_totalIn, activatesAt, _last(_totalIn) + amount);
    }

    function _requireNothingPending(address owner) internal view {
        Checkpoint[] storage h = _stakeHistory[owner];
        uint256 len = h.length;
        if (len > 0 && h[len - 1].blockNumber > block.number) revert StakePendingActivation(h[len - 1].blockNumber);
    }

    function _exit(address owner, Operator storage op) internal {
        uint256 amount = op.stake;
        uint256 until = block.number + withdrawalDelayBlocks;
        if (until > type(uint32).max) revert BlockNumberOverflow();
        Checkpoint[] storage h = _stakeHistory[owner];
        uint256 len = h.length;
        // Only a slash gets here with a deposit still waiting for activation: cancel it.
        if (len > 0 && h[len - 1].blockNumber > block.number) {
            uint256 activatesAt = h[len - 1].blockNumber;
            uint256 waiting = amount - (len > 1 ? h[len - 2].stake : 0);
            h.pop();
            uint256 inLen = _totalIn.length;
            if (_totalIn[inLen - 1].blockNumber == activatesAt) {
                // No later deposit of anybody: take it out where it went in (exact).
                _totalIn[inLen - 1].stake -= uint224(waiting);
            } else {
                // Later deposits are dated after it: take it out at the latest date. Until then
                // the total over-counts it, which only makes a certificate harder to reach.
                _pushAt(_totalIn, block.number + activationDelayBlocks, _last(_totalIn) - waiting);
            }
            amount -= waiting;
            op.pendingWithdrawal += waiting;
            totalPendingWithdrawals += waiting;
            totalStake -= waiting;
        }
        op.stake = 0;
        op.pendingWithdrawal += amount;
        op.status = Status.Exiting;
        op.withdrawableAtBlock = uint32(until);
        totalStake -= amount;
        totalPendingWithdrawals += amount;
        _pushAt(h, block.number, 0);
        _pushAt(_totalOut, block.number, _last(_totalOut) + amount);
        emit OperatorDeregistered(owner, op.pendingWithdrawal, until);
    }

    function _resolve(address account) internal view returns (address) {
        address owner = _signerOwner[account];
        return owner == address(0) ? account : owner;
    }

    function _checkEndpoint(string calldata endpoint) internal pure {
        uint256 len = bytes(endpoint).length;
        if (len == 0) revert EmptyEndpoint();
        if (len > MAX_ENDPOINT_LENGTH) revert EndpointTooLong(len, MAX_ENDPOINT_LENGTH);
    }

    function _last(Checkpoint[] storage history) internal view returns (uint256) {
        uint256 len = history.length;
        return len == 0 ? 0 : history[len - 1].stake;
    }

    /// @dev Record `value` as of block `at` (>= the last checkpoint's block; overwrites a
    ///      checkpoint of the same block).
    function _pushAt(Checkpoint[] storage history, uint256 at, uint256 value) internal {
        if (value > type(uint224).max) revert StakeOverflow();
        if (at > type(uint32).max) revert BlockNumberOverflow();
        uint256 len = history.length;
        if (len > 0 && history[len - 1].blockNumber == at) {
            history[len - 1].stake = uint224(value);
        } else {
            history.push(Checkpoint({blockNumber: uint32(at), stake: uint224(value)}));
        }
    }

    /// @dev Value of the last checkpoint with blockNumber <= `blockNumber` (0 if none).
    function _lookup(Checkpoint[] storage history, uint256 blockNumber) internal view returns (uint256) {
        uint256 hi = history.length;
        if (hi == 0) return 0;
        if (history[hi - 1].blockNumber <= blockNumber) return history[hi - 1].stake;
        uint256 lo = 0;
        // find the first index with blockNumber > target; answer is the one before it
        while (lo < hi) {
            uint256 mid = (lo + hi) >> 1;
            if (history[mid].blockNumber > blockNumber) hi = mid;
            else lo = mid + 1;
        }
        return lo == 0 ? 0 : history[lo - 1].stake;
    }

    function _send(address to, uint256 amount) internal {
        if (amount == 0) return;
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
