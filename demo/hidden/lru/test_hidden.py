from lrucache import LRUCache


def test_get_refreshes_recency():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert "a" in c
    assert "b" not in c


def test_get_miss_does_not_change_order():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("zzz") is None
    c.put("c", 3)
    assert "a" not in c
    assert "b" in c


def test_many_gets():
    c = LRUCache(3)
    for k in "abc":
        c.put(k, k.upper())
    for k in "aab":
        c.get(k)
    c.put("d", "D")
    assert sorted(k for k in "abcd" if k in c) == ["a", "b", "d"]
