import threading
import time

from msbench.host_share import exclusive_host, shared_host


def test_a_measurement_waits_for_sharers_and_keeps_new_ones_out(tmp_path, monkeypatch):
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    log: list[str] = []
    a_inside, release_a = threading.Event(), threading.Event()

    def compile_child():
        with shared_host():
            log.append("a in")
            a_inside.set()
            release_a.wait(5)
            log.append("a out")

    def probe():
        with exclusive_host():
            log.append("probe in")
            time.sleep(0.1)
            log.append("probe out")

    def later_child():
        with shared_host():
            log.append("c in")

    threads = [threading.Thread(target=compile_child)]
    threads[0].start()
    assert a_inside.wait(5)
    for job in (probe, later_child):            # the probe queues behind a; c arrives behind the probe
        threads.append(threading.Thread(target=job))
        threads[-1].start()
        time.sleep(0.2)
    assert log == ["a in"]
    release_a.set()
    for t in threads:
        t.join(5)
    assert log == ["a in", "a out", "probe in", "probe out", "c in"]


def test_sharers_overlap(tmp_path, monkeypatch):
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    entered = threading.Event()

    def second_sharer():
        with shared_host():
            entered.set()

    with shared_host():
        inner = threading.Thread(target=second_sharer)
        inner.start()
        assert entered.wait(2)                  # got in while the first sharer still holds the host
    inner.join(2)
