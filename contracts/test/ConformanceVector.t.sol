// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Test} from "./utils/Test.sol";
import {NativeStakeRegistry} from "../src/NativeStakeRegistry.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";
import {IStakeSource} from "../src/IStakeSource.sol";

/// Pins the EIP-712 encoding byte for byte with a vector computed OUTSIDE Solidity (cast keccak /
/// abi-encode, and `cast wallet sign --no-hash` with anvil's key #1). The same vector is listed in
/// docs/CONTRACTS.md for the C++ implementation. Deployment mirrors a fresh anvil: deployer
/// 0xf39F...2266 (anvil key #0) at nonce 0 and 1, chain id 31337.
contract ConformanceVectorTest is Test {
    address constant DEPLOYER = 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266;
    address constant MANAGER = 0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512;
    address constant SIGNER = 0x70997970C51812dc3A010C7d01b50e0d17dc79C8; // anvil key #1

    ConsensorServiceManager manager;

    function setUp() public {
        vm.chainId(31337);
        vm.startPrank(DEPLOYER);
        NativeStakeRegistry registry = new NativeStakeRegistry(1 ether, 6, 1, MANAGER);
        manager = new ConsensorServiceManager(
            IStakeSource(address(registry)), 6667, 1000, address(0xdEaD), ConsensorServiceManager.Params(1, 1, 3, 1)
        );
        vm.stopPrank();
        assertEq(address(manager), MANAGER, "manager address as on a fresh anvil");
    }

    function test_vector() public view {
        assertEq(
            manager.DOMAIN_TYPEHASH(),
            0x8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f,
            "EIP712Domain typehash"
        );
        assertEq(
            manager.ATTESTATION_TYPEHASH(),
            0xd643542d47406c462d31cb8b12d939fc6629b8c8826b059b10dfa43efa92fd8e,
            "Attestation typehash"
        );
        assertEq(
            manager.domainSeparator(),
            0x6e9e086d90984847784b819feb735f7b238f5b999ec87e48667cd7ab842fb501,
            "domain separator"
        );
        bytes32 digest = manager.attestationDigest(bytes32(uint256(1)), bytes32(uint256(2)), bytes32(uint256(4)), 1);
        assertEq(digest, 0x1c89b74d190cdf46a3874487e1b04a33e534988065cc43ebd1114923d03ee48f, "digest");
        bytes memory sig =
            hex"67ec98d9d730e40e8dff7a0f8e892d6408b602c91f85d8dbac009bc2191998e26a894b098219cf92cd47b7173cd0a4154b16ad1fbc6adf11b455bac86eb1fb801c";
        ConsensorServiceManager.Attestation memory a =
            ConsensorServiceManager.Attestation(bytes32(uint256(1)), bytes32(uint256(2)), bytes32(uint256(4)), 1);
        assertEq(manager.recoverAttestationSigner(a, sig), SIGNER, "recovered signer");
    }
}
