// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Vm, VM_ADDRESS} from "./Vm.sol";

/// @notice Minimal test base: cheatcodes, ds-test style log events (shown by `forge test -vv`),
///         and assertions that revert with a message on failure.
abstract contract Test {
    Vm internal constant vm = Vm(VM_ADDRESS);

    bool public IS_TEST = true;

    event log(string);
    event log_named_uint(string key, uint256 val);
    event log_named_address(string key, address val);
    event log_named_bytes32(string key, bytes32 val);

    function fail(string memory message) internal pure {
        revert(string.concat("assertion failed: ", message));
    }

    function assertTrue(bool c, string memory message) internal pure {
        if (!c) fail(message);
    }

    function assertTrue(bool c) internal pure {
        assertTrue(c, "expected true");
    }

    function assertFalse(bool c, string memory message) internal pure {
        if (c) fail(message);
    }

    function assertEq(uint256 a, uint256 b, string memory message) internal pure {
        if (a != b) {
            fail(string.concat(message, ": ", _u(a), " != ", _u(b)));
        }
    }

    function assertEq(uint256 a, uint256 b) internal pure {
        assertEq(a, b, "uint mismatch");
    }

    function assertEq(address a, address b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": address mismatch"));
    }

    function assertEq(address a, address b) internal pure {
        assertEq(a, b, "address");
    }

    function assertEq(bytes32 a, bytes32 b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": bytes32 mismatch"));
    }

    function assertEq(bytes32 a, bytes32 b) internal pure {
        assertEq(a, b, "bytes32");
    }

    function assertEq(bool a, bool b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": bool mismatch"));
    }

    function assertEq(string memory a, string memory b, string memory message) internal pure {
        if (keccak256(bytes(a)) != keccak256(bytes(b))) fail(string.concat(message, ": '", a, "' != '", b, "'"));
    }

    function assertLe(uint256 a, uint256 b, string memory message) internal pure {
        if (a > b) fail(string.concat(message, ": ", _u(a), " > ", _u(b)));
    }

    function assertGe(uint256 a, uint256 b, string memory message) internal pure {
        if (a < b) fail(string.concat(message, ": ", _u(a), " < ", _u(b)));
    }

    function bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        require(lo <= hi, "bound: lo > hi");
        if (x >= lo && x <= hi) return x;
        uint256 size = hi - lo;
        if (size == type(uint256).max) return x;
        return lo + (x % (size + 1));
    }

    function _u(uint256 v) internal pure returns (string memory) {
        if (v == 0) return "0";
        uint256 len;
        for (uint256 t = v; t != 0; t /= 10) ++len;
        bytes memory b = new bytes(len);
        for (; v != 0; v /= 10) b[--len] = bytes1(uint8(48 + v % 10));
        return string(b);
    }
}
