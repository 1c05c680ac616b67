"""Several tables, one way (issue 36, section 2): qemb.compile(tensor=[...])
makes one artifact of several named tables, lookups name their table (none
on an artifact of several is an error listing them), and
Runtime.embedding_bags_flat pools the flat TBE / KeyedJaggedTensor form
exactly as embedding_bag does feature by feature."""
import os
import re

import numpy as np
import pytest

import qemb
from conftest import make_table, write_safetensors


@pytest.fixture
def rec(tmp):
    ckpt = os.path.join(tmp, "rec.safetensors")
    write_safetensors(ckpt, {"emb.user.weight": ("F32", make_table(12, 4, 1)),
                             "emb.item.weight": ("F32", make_table(20, 6, 2))})
    art = os.path.join(tmp, "rec.qemb")
    info = qemb.compile(ckpt, tensor=["emb.user.weight=user", "emb.i*=item"], qnn_sdk_version="2.48", out=art)
    assert [t["name"] for t in info["tables"]] == ["user", "item"]
    return qemb.Runtime(art)


def test_lookup_names_its_table(rec):
    listed = "the artifact holds 2 tables (user, item); pass table=NAME (see Runtime.tables)"
    with pytest.raises(qemb.InvalidArgument, match="^" + re.escape(listed) + "$"):
        rec.lookup([1])
    with pytest.raises(qemb.InvalidArgument, match="^" + re.escape(listed) + "$"):
        rec.lookup_dequantized([1])
    with pytest.raises(qemb.InvalidArgument, match="^" + re.escape(listed) + "$"):
        rec.embedding_bag([1], [0])
    assert rec.lookup([1, 2], table="item").shape == (2, 6)
    assert rec.lookup_dequantized([1], table="user", dtype="f16").dtype == np.float16
    with pytest.raises(qemb.IdOutOfRange, match=r"^table 'user': token id 12 at position 0 is past the last row; "
                                                r"ids must be in \[0, 12\)$"):
        rec.lookup([12], table="user")
    with pytest.raises(qemb.NotFound, match=r"^the artifact has no table 'nope'; its tables: user, item$"):
        rec.lookup([1], table="nope")


def test_flat_bags_are_embedding_bag_per_feature(rec):
    user = rec.embedding_bag([1, 2, 3], [0, 2], table="user")
    item = rec.embedding_bag([4, 19], [0, 1], table="item")
    out = rec.embedding_bags_flat(np.array([1, 2, 3, 4, 19]), np.array([0, 2, 3, 4, 5]))
    assert out.shape == (2, 10)
    np.testing.assert_array_equal(out, np.concatenate([user, item], axis=1))
    # Features may share a table, by name or index.
    shared = rec.embedding_bags_flat([4, 19, 4, 19], [0, 1, 2, 3, 4], feature_tables=["item", 1])
    np.testing.assert_array_equal(shared, np.concatenate([item, item], axis=1))
    with pytest.raises(qemb.IdOutOfRange, match=r"^feature 1 \(table 'item'\): id 20 at position 4 of indices "
                                                r"\(bag 1\) is past the last row; ids must be in \[0, 20\)$"):
        rec.embedding_bags_flat([1, 2, 3, 4, 20], [0, 2, 3, 4, 5])
    with pytest.raises(qemb.InvalidArgument, match=r"^offsets holds 4 values; 2 features of B bags each need "
                                                   r"2 \* B \+ 1"):
        rec.embedding_bags_flat([1, 2, 3, 4], [0, 2, 3, 4])
    with pytest.raises(qemb.NotFound, match=r"^feature_tables\[0\]: the artifact has no table 'nope'"):
        rec.embedding_bags_flat([1], [0, 1], feature_tables=["nope"])
