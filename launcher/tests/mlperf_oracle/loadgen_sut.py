"""Run MLPerf LoadGen (the `mlcommons-loadgen` wheel) against an instant SUT and print what it issued.

    python loadgen_sut.py MODEL SCENARIO TOTAL_COUNT PERF_COUNT USER_CONF OUT_DIR [MODE]

MODE is a `TestMode` name (PerformanceOnly unless given). LoadGen reads its built-in mlperf.conf and then USER_CONF (`TestSettings.FromConfig`), exactly as a submission
harness does. The SUT answers every sample at once with one token of a fixed answer (`n_tokens` 2), so what this
pins is LoadGen's choice of samples and queries, not timings. It prints one JSON line: `issued`, the sample index
of every sample in issue order, and `queries`, the sample count of every query; LoadGen's own logs go to OUT_DIR.
"""

import array
import json
import sys

import mlperf_loadgen as lg


def main():
    model, scenario, total, perf, user_conf, out_dir = sys.argv[1:7]
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    mode = sys.argv[7] if len(sys.argv) > 7 else "PerformanceOnly"
    settings.mode = getattr(lg.TestMode, mode)
    settings.FromConfig(user_conf, model, scenario)

    issued, queries = [], []
    answer = array.array("B", b"ok")

    def issue_queries(samples):
        queries.append(len(samples))
        responses = []
        for sample in samples:
            issued.append(sample.index)
            address, length = answer.buffer_info()
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample.id, address, length)])
            responses.append(lg.QuerySampleResponse(sample.id, address, length, 2))
        lg.QuerySamplesComplete(responses)

    sut = lg.ConstructSUT(issue_queries, lambda: None)
    qsl = lg.ConstructQSL(int(total), int(perf), lambda _: None, lambda _: None)
    log = lg.LogOutputSettings()
    log.outdir = out_dir
    log.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log
    lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    print(json.dumps({"issued": issued, "queries": queries}))


if __name__ == "__main__":
    main()
