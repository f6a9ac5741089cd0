import pytest

from lrucache import LRUCache


def test_put_get():
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1
    assert c.get("missing", 42) == 42


def test_evicts_oldest_insert():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("c", 3)
    assert "a" not in c
    assert len(c) == 2


def test_update_existing_key():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("a", 5)
    assert c.get("a") == 5
    assert len(c) == 1


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)
