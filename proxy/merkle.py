"""Merkle hash trees as RFC 9162 (Certificate Transparency v2) section 2.1 defines them.

Trees are built over leaf hashes (see `leaf_hash`). Proofs are lists of node
hashes in the order the RFC gives them: from the bottom of the tree up.
"""

from collections.abc import Sequence
from hashlib import sha256
from typing import Self

try:
    from spillage.proxy._linecheck import extend as _extend
except ImportError:  # built without a C compiler or OpenSSL's headers: the loop below
    _extend = None

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
HASH_SIZE = 32
EMPTY_ROOT = sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """Return the hash of a leaf: SHA-256(0x00 || data)."""
    digest = sha256(LEAF_PREFIX)
    digest.update(data)  # no copy of a long line to prefix it
    return digest.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the hash of an interior node: SHA-256(0x01 || left || right)."""
    return sha256(NODE_PREFIX + left + right).digest()


class MerkleFrontier:
    """The head of a growing tree, kept in O(log n) memory.

    It holds the roots of the perfect subtrees that the leaves so far fall
    into (the compact range of [0, size)), largest and leftmost first.
    """

    def __init__(self) -> None:
        self._roots: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return self._size

    def append(self, leaf: bytes) -> None:
        """Append a leaf hash, merging the perfect subtrees it completes."""
        node, carry = leaf, self._size
        while carry & 1:
            node = node_hash(self._roots.pop(), node)
            carry >>= 1
        self._roots.append(node)
        self._size += 1

    def extend(self, leaves: bytes) -> None:
        """Append the leaf hashes that `leaves` holds end to end, HASH_SIZE bytes each (in C when the
        package's extension was built: proxy/_linecheck.c, the same tree, tests/test_merkle.py)."""
        if _extend is not None:
            self._size = _extend(self._roots, self._size, leaves)
            return
        roots, size = self._roots, self._size
        for at in range(0, len(leaves), HASH_SIZE):
            node, carry = leaves[at:at + HASH_SIZE], size
            while carry & 1:
                node = sha256(NODE_PREFIX + roots.pop() + node).digest()
                carry >>= 1
            roots.append(node)
            size += 1
        self._size = size

    def root(self) -> bytes:
        """Return the tree hash of the leaves so far (EMPTY_ROOT when none)."""
        if not self._roots:
            return EMPTY_ROOT
        node = self._roots[-1]
        for left in self._roots[-2::-1]:
            node = node_hash(left, node)
        return node

    def copy(self) -> Self:
        """Return a frontier that grows independently of this one."""
        clone = type(self)()
        clone._roots = self._roots.copy()
        clone._size = self._size
        return clone


def _split(n: int) -> int:
    """Return the largest power of two smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _subtree_root(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    """Return MTH(D[start:end]) for start < end, in end - start - 1 hashes."""
    # Hashing neighbours in pairs, level by level, and carrying an odd last
    # node up unchanged gives the RFC's tree: its left subtree is always the
    # largest power of two.
    level = leaves[start:end]
    while len(level) > 1:
        pairs = iter(level)
        nodes = [sha256(NODE_PREFIX + left + right).digest() for left, right in zip(pairs, pairs)]
        if len(level) % 2:
            nodes.append(level[-1])
        level = nodes
    return level[0]


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """Return MTH(D[n]), the tree hash of all the leaf hashes (EMPTY_ROOT when none)."""
    if not leaf_hashes:
        return EMPTY_ROOT
    return _subtree_root(leaf_hashes, 0, len(leaf_hashes))


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """Return PATH(index, D[size]) (RFC 9162 section 2.1.3.1).

    That is the audit path of leaf `index` in the tree of the first `size`
    leaves (all of them by default). Raises ValueError unless
    0 <= index < size <= len(leaf_hashes).
    """
    if size is None:
        size = len(leaf_hashes)
    if not 0 <= index < size <= len(leaf_hashes):
        raise ValueError(f"no leaf {index} in a tree of {size} of {len(leaf_hashes)} leaves")
    path = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(_subtree_root(leaf_hashes, start + k, end))
            end = start + k
        else:
            path.append(_subtree_root(leaf_hashes, start, start + k))
            start += k
    return path[::-1]


def consistency_proof(
    leaf_hashes: Sequence[bytes], old_size: int, new_size: int | None = None
) -> list[bytes]:
    """Return PROOF(old_size, D[new_size]) (RFC 9162 section 2.1.4.1).

    It shows that the tree of the first `new_size` leaves (all of them by
    default) extends that of the first `old_size`; it is empty when the sizes
    are equal. Raises ValueError unless 0 < old_size <= new_size <= len(leaf_hashes).
    """
    if new_size is None:
        new_size = len(leaf_hashes)
    if not 0 < old_size <= new_size <= len(leaf_hashes):
        raise ValueError(f"no proof from {old_size} to {new_size} of {len(leaf_hashes)} leaves")
    proof = []
    start, end = 0, new_size
    while old_size < end:
        k = _split(end - start)
        if old_size <= start + k:
            proof.append(_subtree_root(leaf_hashes, start + k, end))
            end = start + k
        else:
            proof.append(_subtree_root(leaf_hashes, start, start + k))
            start += k
    # The subtree reached ends the old tree. At start 0 it is the old tree
    # itself, whose root the verifier has, so it is left out (the RFC's b).
    if start:
        proof.append(_subtree_root(leaf_hashes, start, end))
    return proof[::-1]


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes) -> bool:
    """Check an audit path with RFC 9162 section 2.1.3.2's algorithm.

    True when `path` proves that `leaf` is leaf `index` of the tree of `size`
    leaves whose hash is `root`. Malformed input gives False, never an error.
    """
    if not (isinstance(index, int) and isinstance(size, int) and 0 <= index < size):
        return False
    if not all(map(_is_hash, (leaf, root, *path))):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Check a consistency proof with RFC 9162 section 2.1.4.2's algorithm.

    True when `proof` shows that the tree of `new_size` leaves with hash
    `new_root` extends the tree of `old_size` leaves with hash `old_root`.
    Equal sizes need an empty proof and equal roots. Malformed input, including
    an old size of 0, gives False, never an error.
    """
    if not (isinstance(old_size, int) and isinstance(new_size, int) and 0 < old_size <= new_size):
        return False
    if not all(map(_is_hash, (old_root, new_root, *proof))):
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root
