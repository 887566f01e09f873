// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title ReentrancyGuard
/// @notice One lock for every external function that moves ether, in transient storage
/// (EIP-1153), so it costs no storage slot and resets at the end of each transaction.
abstract contract ReentrancyGuard {
    bool private transient _locked;

    error Reentrancy();

    modifier nonReentrant() {
        if (_locked) revert Reentrancy();
        _locked = true;
        _;
        _locked = false;
    }
}
