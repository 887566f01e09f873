// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title IStakeSource
/// @notice What the Consensor service manager needs to know about operator stake. The native-ETH
///         `NativeStakeRegistry` implements it today; an EigenLayer-restaking adapter can implement
///         the same interface later without any change to the slashing logic.
/// @dev All "At" queries are answered from append-only checkpoints. A query for a block that is
///      not yet final (>= block.number) returns the latest value, which may still change within
///      the current block; callers that need a stable answer must use a past block.
interface IStakeSource {
    /// @notice Current (active) stake of `operator`; 0 when not registered or exiting.
    function stakeOf(address operator) external view returns (uint256);

    /// @notice Active stake of `operator` at the end of block `blockNumber`.
    function stakeAt(address operator, uint256 blockNumber) external view returns (uint256);

    /// @notice Sum of active stake at the end of block `blockNumber`.
    function totalStakeAt(uint256 blockNumber) external view returns (uint256);

    /// @notice Everything that can still be taken from `operator` now (active stake plus stake
    ///         waiting out the withdrawal delay).
    function slashableStakeOf(address operator) external view returns (uint256);

    /// @notice Blocks an exiting operator's stake stays slashable before it can be withdrawn.
    function withdrawalDelayBlocks() external view returns (uint32);

    /// @notice The only address allowed to call `slash` (the service manager).
    function slasher() external view returns (address);

    /// @notice Takes up to `amount` of `operator`'s slashable stake, ejects the operator from the
    ///         active set, and transfers the taken value to the slasher (`msg.sender`).
    /// @return slashed the amount actually taken (may be less than `amount`, possibly 0).
    function slash(address operator, uint256 amount) external returns (uint256 slashed);
}
