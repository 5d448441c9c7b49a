// The two threads of a datapath (tx and rx), each with its ControlChannel:
// started together, told to stop and joined together. Shared by the ESP,
// HTTPS-tunnel and DTLS datapaths.
#pragma once

#include <functional>
#include <thread>

namespace espvpn::datapath {

class ControlChannel;

class PipelineThreads {
public:
    PipelineThreads() = default;
    ~PipelineThreads() { stop(); }
    PipelineThreads(const PipelineThreads&) = delete;
    PipelineThreads& operator=(const PipelineThreads&) = delete;

    // Runs tx_run and rx_run on their own threads; throws std::system_error if a
    // thread cannot start (stop() then joins what did start).
    void start(ControlChannel& tx, std::function<void()> tx_run, ControlChannel& rx, std::function<void()> rx_run);
    // Sets each channel's stop flag, wakes it, joins both threads. Idempotent.
    void stop();

private:
    ControlChannel* tx_control_ = nullptr;
    ControlChannel* rx_control_ = nullptr;
    std::thread tx_;
    std::thread rx_;
};

}  // namespace espvpn::datapath
