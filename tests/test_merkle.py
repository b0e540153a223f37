"""Tests of spillage.proxy.merkle, the RFC 9162 Merkle tree.

Known answers come from outside this project: pymerkle (an independent
implementation of the same tree, a test dependency) and the worked example of
RFC 9162 section 2.1.5 (RFC 6962 section 2.1.3).
"""

import functools
import hashlib

import pytest
from pymerkle import InmemoryTree

from spillage.proxy.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    LEAF_PREFIX,
    NODE_PREFIX,
    MerkleFrontier,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_of,
    verify_consistency,
    verify_inclusion,
)

SMALL_SIZES = range(1, 71)
LARGE_SIZES = [127, 128, 129, 1000, 1024, 1025]
DATA = [b"entry %d" % i for i in range(max(LARGE_SIZES))]
LEAVES = [leaf_hash(d) for d in DATA]


@functools.cache
def reference_tree() -> InmemoryTree:
    """pymerkle's tree of DATA; sha256 with the 0x00/0x01 prefixes are its defaults."""
    tree = InmemoryTree.init_from_entries(DATA, algorithm="sha256")
    assert tree.algorithm == "sha256" and tree.security
    return tree


@functools.cache
def reference_mth(start: int, end: int) -> bytes:
    """MTH(D[start:end]) as pymerkle computes it."""
    return InmemoryTree.init_from_entries(DATA[start:end], algorithm="sha256").get_root()


@functools.cache
def root(size: int) -> bytes:
    return root_of(LEAVES[:size])


def largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def rfc_subproof_ranges(m: int, start: int, end: int, b: bool) -> list[tuple[int, int]]:
    """SUBPROOF(m, D[start:end], b) of RFC 9162 section 2.1.4.1, as the leaf
    range under each node, written recursively as the RFC states it."""
    n = end - start
    if m == n:
        return [] if b else [(start, end)]
    k = largest_power_of_two_below(n)
    if m <= k:
        return rfc_subproof_ranges(m, start, start + k, b) + [(start + k, end)]
    return rfc_subproof_ranges(m - k, start + k, end, False) + [(start, start + k)]


def some_of(size: int) -> list[int]:
    """Every value in [0, size) for small sizes, a spread of them for large ones."""
    if size <= max(SMALL_SIZES):
        return list(range(size))
    return sorted({0, 1, 2, 63, 64, size // 3, size // 2, size - 2, size - 1})


def flipped(value: bytes, position: int = 0) -> bytes:
    position %= len(value)
    return value[:position] + bytes([value[position] ^ 0x5A]) + value[position + 1 :]


def with_flipped(nodes: list[bytes], n: int) -> list[bytes]:
    """A copy of the nodes with a byte of node n flipped (a different byte for each n)."""
    return [*nodes[:n], flipped(nodes[n], 7 * n), *nodes[n + 1 :]]


# Known answers: pymerkle.


def test_hashes_match_pymerkle():
    tree = reference_tree()
    assert (LEAF_PREFIX, NODE_PREFIX, HASH_SIZE) == (b"\x00", b"\x01", 32)
    assert EMPTY_ROOT == hashlib.sha256(b"").digest() == tree.get_root(0)
    assert [tree.get_leaf(i + 1) for i in range(len(DATA))] == LEAVES
    assert leaf_hash(b"") == hashlib.sha256(b"\x00").digest()
    assert node_hash(LEAVES[0], LEAVES[1]) == tree.get_root(2)
    assert node_hash(LEAVES[0], LEAVES[1]) == hashlib.sha256(b"\x01" + LEAVES[0] + LEAVES[1]).digest()


def test_roots_match_pymerkle():
    tree = reference_tree()
    for size in range(len(LEAVES) + 1):
        assert root_of(LEAVES[:size]) == tree.get_root(size), size


@pytest.mark.parametrize("size", [*SMALL_SIZES, *LARGE_SIZES])
def test_inclusion_proofs_match_pymerkle(size):
    tree = reference_tree()
    for index in some_of(size):
        # pymerkle counts leaves from 1 and starts its path with the leaf itself.
        theirs = tree.prove_inclusion(index + 1, size).path
        assert theirs[0] == LEAVES[index]
        assert inclusion_proof(LEAVES, index, size) == theirs[1:], index
        assert inclusion_proof(LEAVES[:size], index) == theirs[1:], index


@pytest.mark.parametrize("size", [*SMALL_SIZES, *LARGE_SIZES])
def test_consistency_proofs_match_the_rfc_definition_over_pymerkle_hashes(size):
    # pymerkle's consistency paths are laid out differently from RFC 9162's
    # (they also carry the old tree's nodes), so the nodes are chosen here by
    # the RFC's recursive definition and their hashes are computed by pymerkle.
    for old_size in [m for m in some_of(size + 1) if m]:
        expected = [reference_mth(a, b) for a, b in rfc_subproof_ranges(old_size, 0, size, True)]
        assert consistency_proof(LEAVES, old_size, size) == expected, old_size
        assert consistency_proof(LEAVES[:size], old_size) == expected, old_size


# Known answers: the worked example of RFC 9162 section 2.1.5.


def test_rfc_example():
    # The RFC's names: a..f and j are the leaf nodes of d0..d6, the rest interior nodes.
    leaves = a, b, c, d, e, f, j = [leaf_hash(b"d%d" % n) for n in range(7)]
    g, h, i = node_hash(a, b), node_hash(c, d), node_hash(e, f)
    k, l = node_hash(g, h), node_hash(i, j)
    hash_, hash0, hash1, hash2 = node_hash(k, l), node_hash(g, c), k, node_hash(k, i)

    assert [root_of(leaves[:n]) for n in (7, 3, 4, 6)] == [hash_, hash0, hash1, hash2]
    assert inclusion_proof(leaves, 0) == [b, h, l]
    assert inclusion_proof(leaves, 3) == [c, g, l]
    assert inclusion_proof(leaves, 4) == [f, j, k]
    assert inclusion_proof(leaves, 6) == [i, k]
    assert consistency_proof(leaves, 3) == [c, d, g, l]
    assert consistency_proof(leaves, 4) == [l]
    assert consistency_proof(leaves, 6) == [i, j, k]
    for old_size, old_root in [(3, hash0), (4, hash1), (6, hash2)]:
        assert verify_consistency(old_size, 7, old_root, hash_, consistency_proof(leaves, old_size))


# Verification: every proof passes, every corruption fails.


def inclusion_corruptions(index: int, size: int, path: list[bytes]):
    leaf, good_root = LEAVES[index], root(size)
    yield "flipped leaf", (flipped(leaf), index, size, path, good_root)
    yield "flipped root", (leaf, index, size, path, flipped(good_root, index))
    yield "empty root", (leaf, index, size, path, EMPTY_ROOT)
    yield "other leaf", (LEAVES[index + 1], index, size, path, good_root)
    for n in range(len(path)):
        yield f"flipped node {n}", (leaf, index, size, with_flipped(path, n), good_root)
        yield f"dropped node {n}", (leaf, index, size, path[:n] + path[n + 1 :], good_root)
    yield "extra node at end", (leaf, index, size, [*path, good_root], good_root)
    yield "extra node at start", (leaf, index, size, [leaf, *path], good_root)
    for wrong in {index - 1, index + 1, index ^ 1, size - 1 - index, size} - {index}:
        yield f"index {wrong}", (leaf, wrong, size, path, good_root)
    for wrong in {size - 1, size + 1, size * 2, size // 2, index} - {size}:
        # The wrong size is given with its own root, as a signed tree head would.
        yield f"size {wrong}", (leaf, index, wrong, path, root(wrong))
    # With the proof's own root, a size off by one can verify (the path has the
    # same shape); one that changes the path's length must not.
    for wrong in {size * 2, size // 2}:
        yield f"size {wrong} with the root of size {size}", (leaf, index, wrong, path, good_root)


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_inclusion_verification(size):
    for index in range(size):
        path = inclusion_proof(LEAVES, index, size)
        assert verify_inclusion(LEAVES[index], index, size, path, root(size)), index
        for what, args in inclusion_corruptions(index, size, path):
            assert not verify_inclusion(*args), (index, what)


def consistency_corruptions(old_size: int, new_size: int, proof: list[bytes]):
    old_root, new_root = root(old_size), root(new_size)
    yield "flipped old root", (old_size, new_size, flipped(old_root), new_root, proof)
    yield "flipped new root", (old_size, new_size, old_root, flipped(new_root), proof)
    yield "extra node at end", (old_size, new_size, old_root, new_root, [*proof, new_root])
    yield "old root at start", (old_size, new_size, old_root, new_root, [old_root, *proof])
    yield "new root at start", (old_size, new_size, old_root, new_root, [new_root, *proof])
    if old_size != new_size:
        yield "swapped roots", (old_size, new_size, new_root, old_root, proof)
        yield "empty proof", (old_size, new_size, old_root, new_root, [])
        yield "repeated first node", (old_size, new_size, old_root, new_root, [proof[0], *proof])
        yield "sizes swapped", (new_size, old_size, new_root, old_root, proof)
    for n in range(len(proof)):
        yield f"flipped node {n}", (old_size, new_size, old_root, new_root, with_flipped(proof, n))
        yield f"dropped node {n}", (old_size, new_size, old_root, new_root, proof[:n] + proof[n + 1 :])
    # Wrong sizes are given with their own roots, as signed tree heads would.
    for wrong in {old_size - 1, old_size + 1, old_size * 2, old_size // 2} - {old_size}:
        if 0 < wrong <= new_size:
            yield f"old size {wrong}", (wrong, new_size, root(wrong), new_root, proof)
    for wrong in {new_size - 1, new_size + 1, new_size * 2, new_size // 2} - {new_size}:
        if old_size <= wrong:
            yield f"new size {wrong}", (old_size, wrong, old_root, root(wrong), proof)
    # With the proof's own roots, sizes that change the proof's length must fail.
    m, n = old_size, new_size
    for sizes in {(m * 2, n), (m // 2, n), (m, n * 2), (m, n // 2)} - {(m, n)}:
        yield f"sizes {sizes} with the proof's roots", (*sizes, old_root, new_root, proof)
    yield "old size 0", (0, new_size, EMPTY_ROOT, new_root, proof)


@pytest.mark.parametrize("new_size", SMALL_SIZES)
def test_consistency_verification(new_size):
    for old_size in range(1, new_size + 1):
        proof = consistency_proof(LEAVES, old_size, new_size)
        assert verify_consistency(old_size, new_size, root(old_size), root(new_size), proof), old_size
        for what, args in consistency_corruptions(old_size, new_size, proof):
            assert not verify_consistency(*args), (old_size, what)


def test_a_proof_within_the_right_subtree_does_not_pass_for_the_whole_tree():
    # A proof inside the right subtree followed by the left subtree's root
    # hashes up to the whole tree's root; the sizes claimed must stop it.
    for size in SMALL_SIZES[1:]:
        k = largest_power_of_two_below(size)
        right = LEAVES[k:size]
        for index in range(k, size):
            path = [*inclusion_proof(right, index - k), root(k)]
            assert not verify_inclusion(LEAVES[index], index - k, size - k, path, root(size)), (size, index)
        for old_size in range(k + 1, size):
            proof = [*consistency_proof(right, old_size - k), root(k)]
            claim = (old_size - k, size - k, root(old_size), root(size), proof)
            assert not verify_consistency(*claim), (size, old_size)


def test_verification_rejects_malformed_input_without_raising():
    path, good_root = inclusion_proof(LEAVES, 2, 5), root(5)
    for args in [
        (LEAVES[2], -1, 5, path, good_root),
        (LEAVES[2], 5, 5, path, good_root),
        (LEAVES[2], 0, 0, [], EMPTY_ROOT),
        (LEAVES[2], 2.0, 5, path, good_root),
        (LEAVES[2], 2, None, path, good_root),
        (LEAVES[2], 2, 5, [*path[:-1], "not bytes"], good_root),
        (LEAVES[2], 2, 5, [*path[:-1], path[-1][:-1]], good_root),
        (None, 2, 5, path, good_root),
        (LEAVES[2], 2, 5, path, None),
    ]:
        assert verify_inclusion(*args) is False, args

    proof, old_root = consistency_proof(LEAVES, 3, 5), root(3)
    for args in [
        (0, 5, EMPTY_ROOT, good_root, proof),
        (-1, 5, old_root, good_root, proof),
        (6, 5, old_root, good_root, proof),
        (3, None, old_root, good_root, proof),
        (3, 5, old_root, good_root, [*proof[:-1], 42]),
        (3, 5, old_root, good_root, [*proof[:-1], proof[-1] + b"\x00"]),
        (3, 5, None, good_root, proof),
        (4, 5, None, good_root, consistency_proof(LEAVES, 4, 5)),
        (5, 5, good_root, None, []),
    ]:
        assert verify_consistency(*args) is False, args


def test_proofs_reject_out_of_range_arguments():
    leaves = LEAVES[:5]
    for index, size in [(-1, None), (5, None), (0, 0), (3, 3), (0, 6), (0, -1)]:
        with pytest.raises(ValueError):
            inclusion_proof(leaves, index, size)
    for old_size, new_size in [(0, None), (0, 0), (6, None), (4, 3), (2, 6), (-1, None)]:
        with pytest.raises(ValueError):
            consistency_proof(leaves, old_size, new_size)
    assert consistency_proof(leaves, 5) == []
    with pytest.raises(ValueError):
        inclusion_proof([], 0)


# The incremental tree head.


def test_frontier_matches_root_of_for_every_size():
    frontier = MerkleFrontier()
    for size in range(301):
        assert frontier.size == size
        assert frontier.root() == root_of(LEAVES[:size]), size
        frontier.append(LEAVES[size])


def test_frontier_copy_is_independent():
    frontier = MerkleFrontier()
    for leaf in LEAVES[:5]:
        frontier.append(leaf)
    clone = frontier.copy()
    clone.append(LEAVES[100])
    assert (frontier.size, frontier.root()) == (5, root(5))
    frontier.append(LEAVES[200])
    frontier.append(LEAVES[201])
    assert (clone.size, clone.root()) == (6, root_of([*LEAVES[:5], LEAVES[100]]))
    assert (frontier.size, frontier.root()) == (7, root_of([*LEAVES[:5], LEAVES[200], LEAVES[201]]))


@pytest.mark.parametrize("compiled", [True, False])
def test_a_frontier_extended_by_many_leaves_at_once_is_the_tree_of_them_all(monkeypatch, compiled):
    """extend (in C when the package's extension was built, else the loop of merkle.py) from every size
    up to 130, by runs of 0 to 70 leaves, against root_of the leaves so far."""
    from spillage.proxy import merkle

    assert merkle._extend is not None   # the package was built with its extension (setup.py)
    if not compiled:
        monkeypatch.setattr(merkle, "_extend", None)
    for start in range(131):
        for more in (0, 1, 2, 3, 7, 64, 70):
            frontier = MerkleFrontier()
            for leaf in LEAVES[:start]:
                frontier.append(leaf)
            frontier.extend(b"".join(LEAVES[start:start + more]))
            assert frontier.size == start + more
            assert frontier.root() == root_of(LEAVES[:start + more]), (start, more)
