// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {Fixture} from "./utils/Fixture.sol";

/// operatorsAt grows with every owner that ever registered, including ones long gone, so a
/// churning registrant could push it past an RPC node's eth_call gas cap and stall every node's
/// committee derivation. Nodes read it in pages (operatorsAtPage); these tests check that the
/// pages are exactly the list, at every block and page size, and that a page's gas is bounded
/// by its size rather than by the history.
contract OperatorPagesTest is Fixture {
    uint256 constant CHURNED = 600;
    uint256 constant LIVE = 40;
    uint256 internal firstBlock;
    uint256 internal lastBlock;

    function setUp() public {
        vm.roll(100);
        deployDefault();
        firstBlock = block.number;
        // Owners that register, leave and withdraw, interleaved with owners that stay, one
        // registration per block so the history differs from block to block.
        for (uint256 i; i < CHURNED + LIVE; ++i) {
            address owner = register(0x10000 + i, 1 ether + i);
            vm.roll(block.number + 1);
            if (i % 16 != 0) {
                vm.roll(block.number + ACTIVATION);
                vm.prank(owner);
                registry.deregister();
            }
        }
        vm.roll(block.number + DELAY + 1);
        for (uint256 i; i < CHURNED + LIVE; ++i) {
            address owner = vm.addr(0x10000 + i);
            (NativeStatus status) = _status(owner);
            if (status == NativeStatus.Exiting) {
                vm.prank(owner);
                registry.withdraw();
            }
        }
        lastBlock = block.number;
        vm.roll(block.number + 1);
    }

    enum NativeStatus {
        None,
        Active,
        Exiting
    }

    function _status(address owner) internal view returns (NativeStatus) {
        (uint8 status,,,,,) = _info(owner);
        return NativeStatus(status);
    }

    function _info(address owner) internal view returns (uint8, bool, uint256, uint256, uint256, string memory) {
        (bool ok, bytes memory out) =
            address(registry).staticcall(abi.encodeWithSignature("operatorInfo(address)", owner));
        require(ok, "operatorInfo");
        return abi.decode(out, (uint8, bool, uint256, uint256, uint256, string));
    }

    function _paged(uint256 blockNumber, uint256 pageSize)
        internal
        view
        returns (address[] memory ops, uint256[] memory stakes)
    {
        ops = new address[](registry.operatorCount());
        stakes = new uint256[](ops.length);
        uint256 count;
        uint256 start;
        uint256 pages;
        while (true) {
            (address[] memory o, uint256[] memory s, uint256 next, uint256 total) =
                registry.operatorsAtPage(blockNumber, start, pageSize);
            assertEq(o.length, s.length, "page arrays");
            for (uint256 i; i < o.length; ++i) {
                ops[count] = o[i];
                stakes[count] = s[i];
                ++count;
            }
            ++pages;
            if (next == total) break;
            assertTrue(next > start, "a page must make progress");
            start = next;
        }
        assertEq(pages, pageSize == 0 ? pages : (ops.length + pageSize - 1) / pageSize, "page count");
        assembly ("memory-safe") {
            mstore(ops, count)
            mstore(stakes, count)
        }
    }

    function _assertPagesEqualList(uint256 blockNumber, uint256 pageSize) internal view {
        (address[] memory all, uint256[] memory allStakes) = registry.operatorsAt(blockNumber);
        (address[] memory ops, uint256[] memory stakes) = _paged(blockNumber, pageSize);
        assertEq(ops.length, all.length, "operator count");
        for (uint256 i; i < all.length; ++i) {
            assertEq(ops[i], all[i], "operator order");
            assertEq(stakes[i], allStakes[i], "stake");
        }
    }

    function test_pagesAreTheListAtEveryBlock() public view {
        uint256[4] memory sizes = [uint256(1), 7, 64, 1000];
        // Eight blocks spread over the churn (each call's return data stays in memory, so the
        // test cannot visit every block in one transaction).
        for (uint256 b = firstBlock; b <= lastBlock; b += (lastBlock - firstBlock) / 8) {
            for (uint256 k; k < sizes.length; ++k) {
                _assertPagesEqualList(b, sizes[k]);
            }
        }
        _assertPagesEqualList(lastBlock, 1000);
        // After the churn only the owners that stayed are listed.
        (address[] memory live,) = registry.operatorsAt(lastBlock);
        assertEq(live.length, (CHURNED + LIVE + 15) / 16, "live operators");
    }

    function testFuzz_pagesAreTheList(uint256 blockNumber, uint256 pageSize) public view {
        blockNumber = bound(blockNumber, firstBlock, lastBlock);
        pageSize = bound(pageSize, 1, 2000);
        _assertPagesEqualList(blockNumber, pageSize);
    }

    function test_pageBounds() public view {
        uint256 total = registry.operatorCount();
        (address[] memory o,, uint256 next, uint256 t) = registry.operatorsAtPage(lastBlock, total, 10);
        assertEq(o.length, 0);
        assertEq(next, total);
        assertEq(t, total);
        (o,, next,) = registry.operatorsAtPage(lastBlock, type(uint256).max, type(uint256).max);
        assertEq(o.length, 0);
        assertEq(next, total);
        (o,, next,) = registry.operatorsAtPage(lastBlock, 5, type(uint256).max);
        assertEq(next, total, "an unbounded page ends at the total");
        (o,, next,) = registry.operatorsAtPage(lastBlock, 5, 0);
        assertEq(o.length, 0);
        assertEq(next, 5, "an empty page makes no progress");
    }

    /// The gas of a page is bounded by its size; the whole list is not. Logged for CONTRACTS.md.
    function test_gas_pageIsBoundedByItsSize() public {
        uint256 total = registry.operatorCount();
        // The page first: a call warms the storage it reads, and the later one would be cheaper.
        uint256 g = gasleft();
        registry.operatorsAtPage(lastBlock, 0, 100);
        uint256 page = g - gasleft();
        g = gasleft();
        registry.operatorsAt(lastBlock);
        uint256 whole = g - gasleft();
        emit log_named_uint("owners ever registered", total);
        emit log_named_uint("gas operatorsAt (whole history, view)", whole);
        emit log_named_uint("gas operatorsAtPage (100 owners, view)", page);
        emit log_named_uint("gas per owner in the history (whole / owners)", whole / total);
        assertLe(page * total, whole * 100 * 12 / 10, "a page costs its share of the whole");
    }
}
