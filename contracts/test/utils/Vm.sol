// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice The subset of forge cheatcodes used by these tests and scripts (forge-std is not a
///         dependency: the project builds offline from npm packages only).
interface Vm {
    enum CallerMode {
        None,
        Broadcast,
        RecurrentBroadcast,
        Prank,
        RecurrentPrank
    }

    // environment
    function warp(uint256 newTimestamp) external;
    function roll(uint256 newHeight) external;
    function chainId(uint256 newChainId) external;
    function deal(address account, uint256 newBalance) external;
    function etch(address target, bytes calldata newRuntimeBytecode) external;
    function getNonce(address account) external view returns (uint64);

    // callers
    function prank(address msgSender) external;
    function startPrank(address msgSender) external;
    function stopPrank() external;
    function readCallers() external returns (CallerMode callerMode, address msgSender, address txOrigin);

    // expectations
    function expectRevert() external;
    function expectRevert(bytes4 revertData) external;
    function expectRevert(bytes calldata revertData) external;
    function expectPartialRevert(bytes4 revertData) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData, address emitter)
        external;
    function expectEmit() external;
    function expectEmit(address emitter) external;

    // keys and signatures
    function addr(uint256 privateKey) external pure returns (address keyAddr);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);

    // fuzzing
    function assume(bool condition) external pure;
    function bound(uint256 current, uint256 min, uint256 max) external pure returns (uint256);

    // addresses
    function computeCreateAddress(address deployer, uint256 nonce) external pure returns (address);

    // scripting
    function startBroadcast() external;
    function startBroadcast(uint256 privateKey) external;
    function stopBroadcast() external;
    function envUint(string calldata name) external view returns (uint256 value);
    function envOr(string calldata name, uint256 defaultValue) external view returns (uint256 value);
    function envOr(string calldata name, address defaultValue) external view returns (address value);
    function envOr(string calldata name, string calldata defaultValue) external view returns (string memory value);
    function toString(address value) external pure returns (string memory);
    function toString(uint256 value) external pure returns (string memory);
    function writeFile(string calldata path, string calldata data) external;
    function readFile(string calldata path) external view returns (string memory);
    function createDir(string calldata path, bool recursive) external;
}

address constant VM_ADDRESS = address(uint160(uint256(keccak256("hevm cheat code"))));
