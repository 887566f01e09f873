// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title IStakeSource
/// @notice What the Consensor service manager needs to know about operator stake. The native-ETH
///         `NativeStakeRegistry` implements it today; an EigenLayer-restaking adapter can implement
///         the same interface later without any change to the slashing logic.
/// @dev Two keys per operator: the OWNER (cold) holds and controls the stake; the SIGNER (hot)
///      signs attestations. Attestations recover to signers, so every "At" stake query is keyed
///      by signer and answers for the signer that was bound to its owner at that block (a signer
///      is bound to at most one owner, ever). Owner-keyed queries say so.
///      All "At" queries are answered from checkpoints; stake deposited at block b is dated
///      b + activationDelayBlocks (it counts from then on). A query for a block that is not yet
///      past (>= block.number) may still change; callers that need a stable answer must use a
///      past block.
interface IStakeSource {
    /// @notice Active stake of the operator `owner` at the current block; 0 when not registered,
    ///         exiting, or still waiting for its deposit to activate.
    function stakeOf(address owner) external view returns (uint256);

    /// @notice Active stake behind `signer` at the end of block `blockNumber`: the stake of its
    ///         owner, if `signer` was that owner's signer at that block; 0 otherwise.
    function stakeAt(address signer, uint256 blockNumber) external view returns (uint256);

    /// @notice The owner `signer` was bound to at block `blockNumber` and that owner's active
    ///         stake then; (0, 0) when `signer` was nobody's signer at that block.
    function signerStakeAt(address signer, uint256 blockNumber) external view returns (address owner, uint256 stake);

    /// @notice `signerStakeAt` plus the owner's `slashableStakeOf` now, in one call (what a
    ///         certificate signer needs); slashable is 0 when there is no owner.
    function certificateSignerAt(address signer, uint256 blockNumber)
        external
        view
        returns (address owner, uint256 stake, uint256 slashable);

    /// @notice Sum of active stake at the end of block `blockNumber`.
    function totalStakeAt(uint256 blockNumber) external view returns (uint256);

    /// @notice Everything that can still be taken from the operator `owner` now (stake, active or
    ///         waiting to activate, plus stake waiting out the withdrawal delay).
    function slashableStakeOf(address owner) external view returns (uint256);

    /// @notice Blocks an exiting operator's stake stays slashable before it can be withdrawn.
    function withdrawalDelayBlocks() external view returns (uint32);

    /// @notice A: blocks between a deposit (register, addStake) and the block from which it counts.
    function activationDelayBlocks() external view returns (uint32);

    /// @notice The only address allowed to call `slash` (the service manager).
    function slasher() external view returns (address);

    /// @notice Takes up to `amount` of the operator `owner`'s slashable stake, ejects it from the
    ///         active set, and transfers the taken value to the slasher (`msg.sender`).
    /// @return slashed the amount actually taken (may be less than `amount`, possibly 0).
    function slash(address owner, uint256 amount) external returns (uint256 slashed);
}
