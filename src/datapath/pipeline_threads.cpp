#include "src/datapath/pipeline_threads.h"

#include "src/datapath/pipeline.h"

namespace espvpn::datapath {

void PipelineThreads::start(ControlChannel& tx, std::function<void()> tx_run, ControlChannel& rx,
                            std::function<void()> rx_run) {
    tx_control_ = &tx;
    rx_control_ = &rx;
    tx_ = std::thread(std::move(tx_run));
    rx_ = std::thread(std::move(rx_run));
}

void PipelineThreads::stop() {
    for (ControlChannel* c : {tx_control_, rx_control_}) {
        if (!c) continue;
        c->stop.store(true, std::memory_order_release);
        c->notify();
    }
    if (tx_.joinable()) tx_.join();
    if (rx_.joinable()) rx_.join();
}

}  // namespace espvpn::datapath
