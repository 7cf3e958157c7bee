import threading
import time

from msbench.cache import cache_get, cached


def test_parallel_callers_of_one_key_compute_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(threading.get_ident())
        time.sleep(0.3)                      # long enough that the second caller arrives while it runs
        return {"value": 42}

    results = []
    threads = [threading.Thread(target=lambda: results.append(cached("demo", "k1", compute))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(hit for _, hit in results) == [False, True]
    assert all(entry == {"value": 42} for entry, _ in results)


def test_an_entry_not_worth_keeping_is_returned_but_not_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    entry, hit = cached("demo", "k2", lambda: {"value": None}, keep=lambda e: e["value"] is not None)
    assert entry == {"value": None} and not hit
    assert cache_get("demo", "k2") is None
