// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture} from "./utils/Fixture.sol";
import {ConsensorServiceManager} from "../src/ConsensorServiceManager.sol";

/// Gas of the main entry points, measured as gasleft() deltas around the external call
/// (execution gas only: excludes the 21000 base cost and calldata of a real transaction).
/// State is prepared in setUp so that storage is cold in the measured call, as in a real
/// transaction. Run: forge test --match-contract Gas -vv
abstract contract GasBase is Fixture {
    bytes32 constant TASK = keccak256("gas-task");
    uint256 constant PK_BAD = 0xBAD;
    uint256[] internal signerPks;
    uint64 constant REF_BLOCK = 100 + uint64(ACTIVATION);

    function _setUpOperators(uint256 n) internal {
        vm.roll(100);
        deployDefault();
        register(PK_BAD, 1 ether);
        uint256[] memory pks = new uint256[](n);
        for (uint256 i; i < n; ++i) {
            pks[i] = 0x3000 + i;
            register(pks[i], 1 ether);
        }
        pks = sortByAddress(pks);
        for (uint256 i; i < n; ++i) signerPks.push(pks[i]);
        // The stake deposited at 100 counts from REF_BLOCK = 100 + A on.
        vm.roll(REF_BLOCK + 1);
    }

    function _disputeGas() internal returns (uint256) {
        ConsensorServiceManager.Attestation memory ce = att(TASK, keccak256("good"), REF_BLOCK);
        ConsensorServiceManager.Attestation memory ac = att(TASK, keccak256("bad"), REF_BLOCK);
        bytes[] memory sigs = signAll(signerPks, ce);
        bytes memory acSig = sign(PK_BAD, ac);
        uint256 g = gasleft();
        manager.slashDispute(ac, acSig, ce, sigs);
        return g - gasleft();
    }
}

contract GasRegistryTest is GasBase {
    function setUp() public {
        _setUpOperators(16);
    }

    function test_gas_register() public {
        address op = vm.addr(0x1234);
        vm.deal(op, 1 ether);
        vm.prank(op);
        uint256 g = gasleft();
        registry.register{value: 1 ether}("operator-1.example.org:7000");
        emit log_named_uint("gas register (first registration, 27-byte endpoint)", g - gasleft());
    }

    function test_gas_registerWithSigner() public {
        address op = vm.addr(0x1234);
        address signer = vm.addr(0x5678);
        vm.deal(op, 1 ether);
        bytes memory proof = signerProof(0x5678, op);
        vm.prank(op);
        uint256 g = gasleft();
        registry.register{value: 1 ether}(signer, "operator-1.example.org:7000", proof);
        emit log_named_uint("gas register with a separate signer", g - gasleft());
    }

    function test_gas_rotateSigner() public {
        bytes memory proof = signerProof(0x5678, vm.addr(PK_BAD));
        vm.prank(vm.addr(PK_BAD));
        uint256 g = gasleft();
        registry.rotateSigner(vm.addr(0x5678), proof);
        emit log_named_uint("gas rotateSigner", g - gasleft());
    }

    function test_gas_addStake() public {
        vm.deal(vm.addr(PK_BAD), 1 ether);
        vm.prank(vm.addr(PK_BAD));
        uint256 g = gasleft();
        registry.addStake{value: 1 ether}();
        emit log_named_uint("gas addStake", g - gasleft());
    }

    function test_gas_deregister() public {
        vm.prank(vm.addr(PK_BAD));
        uint256 g = gasleft();
        registry.deregister();
        emit log_named_uint("gas deregister", g - gasleft());
    }

    function test_gas_slashEquivocation() public {
        ConsensorServiceManager.Attestation memory a1 = att(TASK, keccak256("a"), REF_BLOCK);
        ConsensorServiceManager.Attestation memory a2 = att(TASK, keccak256("b"), REF_BLOCK);
        bytes memory s1 = sign(PK_BAD, a1);
        bytes memory s2 = sign(PK_BAD, a2);
        uint256 g = gasleft();
        manager.slashEquivocation(a1, s1, a2, s2);
        emit log_named_uint("gas slashEquivocation", g - gasleft());
    }

    function test_gas_operatorsAt_17() public {
        uint256 g = gasleft();
        registry.operatorsAt(REF_BLOCK);
        emit log_named_uint("gas operatorsAt (17 operators, view)", g - gasleft());
    }
}

contract GasDispute3Test is GasBase {
    function setUp() public {
        _setUpOperators(3);
    }

    function test_gas_slashDispute_3() public {
        emit log_named_uint("gas slashDispute 3 signers", _disputeGas());
    }
}

contract GasDispute7Test is GasBase {
    function setUp() public {
        _setUpOperators(7);
    }

    function test_gas_slashDispute_7() public {
        emit log_named_uint("gas slashDispute 7 signers", _disputeGas());
    }
}

contract GasDispute15Test is GasBase {
    function setUp() public {
        _setUpOperators(15);
    }

    function test_gas_slashDispute_15() public {
        emit log_named_uint("gas slashDispute 15 signers", _disputeGas());
    }

    function test_gas_verifyCertificate_15() public {
        ConsensorServiceManager.Attestation memory ce = att(TASK, keccak256("good"), REF_BLOCK);
        bytes[] memory sigs = signAll(signerPks, ce);
        uint256 g = gasleft();
        manager.verifyCertificate(ce, sigs);
        emit log_named_uint("gas verifyCertificate 15 signers (view)", g - gasleft());
    }
}
