// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IStakeSource} from "./IStakeSource.sol";
import {ReentrancyGuard} from "./ReentrancyGuard.sol";

/// @title NativeStakeRegistry
/// @notice Operator registry of the Consensor AVS, staked in native ETH.
///         An operator registers from its signing address (msg.sender IS the key that signs
///         attestations), announces a gRPC endpoint and deposits at least `minimumStake`.
///         Deregistering moves the stake into a pending withdrawal that stays slashable for
///         `withdrawalDelayBlocks` blocks; after that the operator withdraws it.
///         Stake history is checkpointed per operator and in total, so any node can reconstruct
///         the exact operator set and stakes at a reference block (`operatorsAt`).
contract NativeStakeRegistry is IStakeSource, ReentrancyGuard {
    // ----------------------------------------------------------------------------------------
    // Types
    // ----------------------------------------------------------------------------------------

    enum Status {
        None, // never registered, or withdrew everything
        Active, // registered, stake counts for committees
        Exiting // deregistered (or ejected by a slash); pending withdrawal still slashable
    }

    struct Checkpoint {
        uint32 blockNumber;
        uint224 stake;
    }

    struct Operator {
        Status status;
        bool slashed; // ever slashed: may never register or add stake again
        uint32 withdrawableAtBlock; // first block at which `withdraw` succeeds (when Exiting)
        uint256 stake; // active stake
        uint256 pendingWithdrawal; // stake waiting out the delay (slashable)
        string endpoint; // gRPC endpoint, e.g. "node1.example.org:7000"
    }

    // ----------------------------------------------------------------------------------------
    // Constants, immutables, storage
    // ----------------------------------------------------------------------------------------

    /// @notice Maximum length in bytes of an operator's gRPC endpoint string.
    uint256 public constant MAX_ENDPOINT_LENGTH = 256;

    /// @notice Minimum active stake (wei) to register.
    uint256 public immutable minimumStake;
    /// @notice Blocks between deregistration and the earliest withdrawal.
    uint32 public immutable override withdrawalDelayBlocks;
    /// @inheritdoc IStakeSource
    address public immutable slasher;

    mapping(address => Operator) internal _operators;
    mapping(address => Checkpoint[]) internal _stakeHistory;
    Checkpoint[] internal _totalHistory;
    address[] internal _allOperators; // every address that ever registered, in order of first registration
    mapping(address => bool) internal _known;

    /// @notice Sum of active stake of all operators.
    uint256 public totalStake;
    /// @notice Sum of all pending withdrawals.
    uint256 public totalPendingWithdrawals;

    // ----------------------------------------------------------------------------------------
    // Events
    // ----------------------------------------------------------------------------------------

    event OperatorRegistered(address indexed operator, uint256 stake, string endpoint);
    event StakeAdded(address indexed operator, uint256 amount, uint256 newStake);
    event EndpointUpdated(address indexed operator, string endpoint);
    event OperatorDeregistered(address indexed operator, uint256 pendingWithdrawal, uint256 withdrawableAtBlock);
    event StakeWithdrawn(address indexed operator, uint256 amount);
    event OperatorSlashed(address indexed operator, uint256 amount, address indexed slasher);

    // ----------------------------------------------------------------------------------------
    // Errors
    // ----------------------------------------------------------------------------------------

    error ZeroMinimumStake();
    error ZeroSlasher();
    error AlreadyRegistered(address operator);
    error NotActive(address operator);
    error NotExiting(address operator);
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


    /// @param minimumStake_ minimum stake in wei (> 0)
    /// @param withdrawalDelayBlocks_ withdrawal delay in blocks (may be 0 only for tests/devnets;
    ///        with 0, disputes must land in the same block as the deregistration)
    /// @param slasher_ the service manager allowed to slash (its address can be precomputed)
    constructor(uint256 minimumStake_, uint32 withdrawalDelayBlocks_, address slasher_) {
        if (minimumStake_ == 0) revert ZeroMinimumStake();
        if (slasher_ == address(0)) revert ZeroSlasher();
        if (minimumStake_ > type(uint224).max) revert StakeOverflow();
        minimumStake = minimumStake_;
        withdrawalDelayBlocks = withdrawalDelayBlocks_;
        slasher = slasher_;
    }

    // ----------------------------------------------------------------------------------------
    // Operator actions
    // ----------------------------------------------------------------------------------------

    /// @notice Register msg.sender as an operator with `msg.value` stake.
    function register(string calldata endpoint) external payable {
        Operator storage op = _operators[msg.sender];
        if (op.slashed) revert OperatorWasSlashed(msg.sender);
        if (op.status != Status.None) revert AlreadyRegistered(msg.sender);
        if (msg.value < minimumStake) revert StakeBelowMinimum(msg.value, minimumStake);
        _checkEndpoint(endpoint);

        op.status = Status.Active;
        op.stake = msg.value;
        op.endpoint = endpoint;
        if (!_known[msg.sender]) {
            _known[msg.sender] = true;
            _allOperators.push(msg.sender);
        }
        totalStake += msg.value;
        _push(_stakeHistory[msg.sender], msg.value);
        _push(_totalHistory, totalStake);
        emit OperatorRegistered(msg.sender, msg.value, endpoint);
    }

    /// @notice Add `msg.value` to the active stake of msg.sender.
    function addStake() external payable {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Active) revert NotActive(msg.sender);
        if (msg.value == 0) revert ZeroAmount();
        op.stake += msg.value;
        totalStake += msg.value;
        _push(_stakeHistory[msg.sender], op.stake);
        _push(_totalHistory, totalStake);
        emit StakeAdded(msg.sender, msg.value, op.stake);
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
    ///         withdrawable from block `block.number + withdrawalDelayBlocks`.
    function deregister() external {
        Operator storage op = _operators[msg.sender];
        if (op.status != Status.Active) revert NotActive(msg.sender);
        _exit(msg.sender, op);
    }

    /// @notice Withdraw the pending withdrawal once the delay has passed.
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
    /// @dev Takes from the active stake first, then from the pending withdrawal. The operator is
    ///      marked slashed (never re-registers) and, if still active, ejected: any remainder
    ///      becomes a pending withdrawal with a fresh delay.
    function slash(address operator, uint256 amount) external nonReentrant returns (uint256 slashed) {
        if (msg.sender != slasher) revert OnlySlasher(msg.sender);
        if (amount == 0) return 0;
        Operator storage op = _operators[operator];
        if (op.status == Status.Active) _exit(operator, op);
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
        emit OperatorSlashed(operator, slashed, msg.sender);
        _send(msg.sender, slashed);
    }

    // ----------------------------------------------------------------------------------------
    // Views
    // ----------------------------------------------------------------------------------------

    /// @inheritdoc IStakeSource
    function stakeOf(address operator) external view returns (uint256) {
        return _operators[operator].stake;
    }

    /// @inheritdoc IStakeSource
    function slashableStakeOf(address operator) external view returns (uint256) {
        Operator storage op = _operators[operator];
        return op.stake + op.pendingWithdrawal;
    }

    /// @inheritdoc IStakeSource
    function stakeAt(address operator, uint256 blockNumber) public view returns (uint256) {
        return _lookup(_stakeHistory[operator], blockNumber);
    }

    /// @inheritdoc IStakeSource
    function totalStakeAt(uint256 blockNumber) external view returns (uint256) {
        return _lookup(_totalHistory, blockNumber);
    }

    /// @notice The operator set at the end of block `blockNumber`: every operator ever registered
    ///         whose active stake at that block is > 0, in order of first registration, with stakes.
    ///         Every node derives the committee from this list for a given reference block.
    function operatorsAt(uint256 blockNumber)
        external
        view
        returns (address[] memory operators, uint256[] memory stakes)
    {
        uint256 n = _allOperators.length;
        operators = new address[](n);
        stakes = new uint256[](n);
        uint256 count;
        for (uint256 i; i < n; ++i) {
            address a = _allOperators[i];
            uint256 s = stakeAt(a, blockNumber);
            if (s > 0) {
                operators[count] = a;
                stakes[count] = s;
                ++count;
            }
        }
        assembly ("memory-safe") {
            mstore(operators, count)
            mstore(stakes, count)
        }
    }

    /// @notice Number of addresses that ever registered.
    function operatorCount() external view returns (uint256) {
        return _allOperators.length;
    }

    /// @notice The `index`-th address that ever registered.
    function operatorAtIndex(uint256 index) external view returns (address) {
        return _allOperators[index];
    }

    /// @notice Full record of `operator`.
    function operatorInfo(address operator)
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
        Operator storage op = _operators[operator];
        return (op.status, op.slashed, op.stake, op.pendingWithdrawal, op.withdrawableAtBlock, op.endpoint);
    }

    /// @notice Announced gRPC endpoint of `operator` (kept after deregistration).
    function endpointOf(address operator) external view returns (string memory) {
        return _operators[operator].endpoint;
    }

    /// @notice Number of stake checkpoints of `operator`.
    function stakeCheckpointCount(address operator) external view returns (uint256) {
        return _stakeHistory[operator].length;
    }

    /// @notice The `index`-th stake checkpoint of `operator`.
    function stakeCheckpoint(address operator, uint256 index) external view returns (uint32, uint224) {
        Checkpoint storage c = _stakeHistory[operator][index];
        return (c.blockNumber, c.stake);
    }

    /// @notice Number of total-stake checkpoints.
    function totalStakeCheckpointCount() external view returns (uint256) {
        return _totalHistory.length;
    }

    // ----------------------------------------------------------------------------------------
    // Internals
    // ----------------------------------------------------------------------------------------

    function _exit(address operator, Operator storage op) internal {
        uint256 amount = op.stake;
        uint256 until = block.number + withdrawalDelayBlocks;
        if (until > type(uint32).max) revert BlockNumberOverflow();
        op.stake = 0;
        op.pendingWithdrawal += amount;
        op.status = Status.Exiting;
        op.withdrawableAtBlock = uint32(until);
        totalStake -= amount;
        totalPendingWithdrawals += amount;
        _push(_stakeHistory[operator], 0);
        _push(_totalHistory, totalStake);
        emit OperatorDeregistered(operator, op.pendingWithdrawal, until);
    }

    function _checkEndpoint(string calldata endpoint) internal pure {
        uint256 len = bytes(endpoint).length;
        if (len == 0) revert EmptyEndpoint();
        if (len > MAX_ENDPOINT_LENGTH) revert EndpointTooLong(len, MAX_ENDPOINT_LENGTH);
    }

    /// @dev Record `value` as of the current block (overwrites a checkpoint of the same block).
    function _push(Checkpoint[] storage history, uint256 value) internal {
        if (value > type(uint224).max) revert StakeOverflow();
        if (block.number > type(uint32).max) revert BlockNumberOverflow();
        uint256 len = history.length;
        if (len > 0 && history[len - 1].blockNumber == block.number) {
            history[len - 1].stake = uint224(value);
        } else {
            history.push(Checkpoint({blockNumber: uint32(block.number), stake: uint224(value)}));
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
