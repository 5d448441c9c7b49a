#include "src/datapath/stats_reporter.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "src/log/logger.h"

namespace espvpn::datapath {

namespace {
// The process-wide SIGUSR1 eventfd (one reporter at a time listens to it).
std::atomic<int> g_sigusr1_fd{-1};

void on_sigusr1(int) {
    const int saved = errno;
    const int fd = g_sigusr1_fd.load(std::memory_order_relaxed);
    if (fd >= 0) {
        const std::uint64_t one = 1;
        (void)!::write(fd, &one, sizeof one);
    }
    errno = saved;
}
}  // namespace

Result<std::unique_ptr<StatsReporter>> StatsReporter::start(Source source, const StatsReporterOptions& options) {
    return start(StatsView{[source] { return source().to_json(); }, [source] { return source().to_text(); }}, options);
}

Result<std::unique_ptr<StatsReporter>> StatsReporter::start(StatsView view, const StatsReporterOptions& options) {
    if (!options.json_path.empty() && !options.files)
        return make_error("stats: no StateFiles to write " + options.json_path + " through");
    std::unique_ptr<StatsReporter> r;
    try {
        r.reset(new StatsReporter(std::move(view), options));
    } catch (const std::exception& e) {
        return make_error(std::string("stats: ") + e.what());
    }
    if (options.print_on_sigusr1) {
        const int sig_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (sig_fd < 0) return make_error(std::string("stats: eventfd: ") + std::strerror(errno));
        g_sigusr1_fd.store(sig_fd);
        struct sigaction sa {};
        sa.sa_handler = on_sigusr1;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (::sigaction(SIGUSR1, &sa, nullptr) != 0)
            return make_error(std::string("stats: sigaction SIGUSR1: ") + std::strerror(errno));
    }
    try {
        r->thread_ = std::thread([p = r.get()] { p->run(); });
    } catch (const std::exception& e) {
        return make_error(std::string("stats: cannot start thread: ") + e.what());
    }
    return r;
}

StatsReporter::StatsReporter(StatsView view, StatsReporterOptions options)
    : view_(std::move(view)), options_(std::move(options)) {}

StatsReporter::~StatsReporter() {
    stop_.notify();
    if (thread_.joinable()) thread_.join();
    if (options_.print_on_sigusr1) {
        ::signal(SIGUSR1, SIG_IGN);
        const int fd = g_sigusr1_fd.exchange(-1);
        if (fd >= 0) ::close(fd);
    }
    if (!options_.json_path.empty()) (void)write_json();
}

Status StatsReporter::write_json() const {
    // A new file beside it (a name planted there is refused, never followed), renamed over it;
    // no fsync: it is rewritten every second and a crash may lose it.
    const std::string text = view_.json() + "\n";
    if (auto st = options_.files->write(options_.json_path, text, io::Sync::no, 0644); !st)
        return make_error("stats: " + st.error().message);
    return {};
}

void StatsReporter::print() const { LOG_INFO << "datapath stats:\n" << view_.text(); }

void StatsReporter::run() {
    const int sig_fd = g_sigusr1_fd.load();
    pollfd fds[2] = {{stop_.fd(), POLLIN, 0}, {sig_fd, POLLIN, 0}};
    const int nfds = sig_fd >= 0 ? 2 : 1;
    const int timeout = options_.json_path.empty() ? -1 : static_cast<int>(options_.json_interval.count());
    for (;;) {
        const int r = ::poll(fds, nfds, timeout);
        if (r < 0 && errno != EINTR) return;
        if (fds[0].revents & POLLIN) return;
        if (nfds > 1 && (fds[1].revents & POLLIN)) {
            std::uint64_t v;
            (void)!::read(sig_fd, &v, sizeof v);
            print();
        }
        if (!options_.json_path.empty()) {
            if (Status s = write_json(); !s) LOG_WARN << s.error().message;
        }
    }
}

}  // namespace espvpn::datapath
