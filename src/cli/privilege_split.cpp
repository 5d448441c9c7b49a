#include "src/cli/privilege_split.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "protocols/base/pkcs11_uri.h"
#include "protocols/broker/broker_message.h"
#include "src/cli/exit_codes.h"
#include "src/io/input_file.h"
#include "src/io/seqpacket.h"
#include "src/log/logger.h"
#include "src/sandbox/capabilities.h"
#include "src/sandbox/landlock.h"
#include "src/sandbox/seccomp_filter.h"
#include "src/sso/browser_launcher.h"
#include "src/sso/callback_socket.h"
#include "src/sso/invoking_user.h"

namespace espvpn::cli {

namespace {

// The broker's signal events, turned into the same signal for this process, so that the
// session's SignalWatch sees what a signal sent to it directly would have been. The thread
// blocks every signal itself (kill() to the process is then taken by another thread).
void start_event_thread(io::UniqueFd events) {
    std::thread([fd = std::move(events)] {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
        for (;;) {
            auto p = io::receive_packet(fd.get(), 64);
            if (!p || p->eof) {
                // The broker has gone: the tun is useless now.
                LOG_ERROR << "the privileged espvpn process has gone; ending";
                ::kill(getpid(), SIGTERM);
                return;
            }
            auto m = broker::decode(p->bytes);
            const auto* e = m ? std::get_if<broker::SignalEvent>(&*m) : nullptr;
            if (!e) continue;
            ::kill(getpid(), e->signo);
        }
    }).detach();
}

// The input files root named, opened here (as root, before the fork): the session process
// reads a file its user cannot open by the descriptor, named /dev/fd/N
// (io::read_input_file); one it can open keeps its path (and its name in messages). A file
// that does not open keeps its path: the session reports it as before. A pkcs11: URI is no file.
struct InputFile {
    std::string* option;  // where the path is
    std::string path;
    int fd = -1;
};

std::vector<InputFile> open_input_files(ClientOptions& o, std::string& token_path) {
    std::vector<InputFile> files;
    auto open_one = [&files](std::string& path) {
        if (path.empty() || is_pkcs11_uri(path) || io::descriptor_of(path) >= 0) return;
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) files.push_back({&path, path, fd});
    };
    for (std::string* p : {&o.certificate, &o.sslkey, &o.cafile, &o.mca_certificate, &o.mca_key}) open_one(*p);
    // An HOTP file is written back by its path (its counter): not by descriptor.
    const std::string_view secret = o.token_secret.reveal_text();
    if (o.token_mode != "hotp" && secret.size() > 1 && secret[0] == '@') {
        token_path = std::string(secret.substr(1));
        open_one(token_path);
    }
    return files;
}

// In the session, after the switch of user: the descriptor for the files its user cannot read.
void name_unreadable_by_descriptor(std::vector<InputFile>& files, ClientOptions& o, std::string& token_path) {
    for (InputFile& f : files) {
        if (::access(f.path.c_str(), R_OK) == 0) {
            ::close(f.fd);
            continue;
        }
        *f.option = "/dev/fd/" + std::to_string(f.fd);
        if (f.option == &token_path) o.token_secret = Secret::from_string("@" + token_path);
    }
    secure_zero(token_path.data(), token_path.size());
}

// A path's directory ("." for a bare name).
std::string parent_of(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

bool exists(const std::string& path) { return !path.empty() && ::access(path.c_str(), F_OK) == 0; }

// In the session, after the switch: temporary files (the driven SSO browser's profile, the
// IdP form's page) go to $TMPDIR when the session user may write there, else to its own
// private directory made as root before the fork (/run/user/UID, or /run/espvpn-sso/UID:
// prepare_callback_dir), e.g. when root's TMPDIR is a directory only root may enter.
void use_writable_tmpdir(uid_t uid) {
    const char* t = std::getenv("TMPDIR");
    const std::string current = t && *t ? t : "/tmp";
    if (::access(current.c_str(), W_OK | X_OK) == 0) return;
    const std::string own = parent_of(sso::callback_socket_path(uid));
    if (::access(own.c_str(), W_OK | X_OK) != 0) {
        LOG_WARN << "the session process cannot write temporary files in " << current << " (TMPDIR)";
        return;
    }
    ::setenv("TMPDIR", own.c_str(), 1);
    LOG_DEBUG << "temporary files of the session process (an SSO browser's profile) in " << own << ": " << current
              << " is not writable by its user";
}

// The secrets of the command line (Secret wipes them as it goes): in the processes that
// never need them (the broker, the browser launcher).
void wipe_session_secrets(ClientOptions& o) {
    for (Secret* secret : {&o.cookie, &o.token_secret, &o.sso_callback, &o.key_password, &o.mca_key_password, &o.proxy})
        *secret = Secret();
}

}  // namespace

bool user_browser_may_start(const ClientOptions& o) {
    if (!o.sso_browser.empty()) return false;  // the driven browser instead (sso_settings.cpp)
    if (o.external_browser) return true;
    if (o.passwd_on_stdin) return false;        // no browser at all then
    // xdg-open starts the user's browser when there is a display.
    for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY"})
        if (const char* d = std::getenv(v); d && *d) return true;
    return false;
}

bool landlock_fits(const ClientOptions& o) {
    // The driven browser runs inside the session. The user's own browser is started by the
    // launcher, forked before these rules and outside them: without one (it failed to
    // start) the session would start the browser itself.
    if (!o.sso_browser.empty() || (user_browser_may_start(o) && !sso::has_browser_launcher())) return false;
    // A PKCS#11 module keeps its own files (SoftHSM's token directory, tpm2-pkcs11's store).
    for (const std::string* p : {&o.certificate, &o.sslkey, &o.mca_certificate, &o.mca_key})
        if (is_pkcs11_uri(*p)) return false;
    return true;
}

Status restrict_session_files(const ClientOptions& o, const RunAsUser& user, const std::string& state_dir) {
    if (!landlock_fits(o)) {
        LOG_DEBUG << "Landlock: not applied (a browser or a PKCS#11 module runs in the session and needs its own "
                     "files)";
        return {};
    }
    sandbox::FileRules rules;
    // The files named on the command line that the session reads by path (the others it
    // reads from their descriptors, opened before the fork).
    for (const std::string* p : {&o.certificate, &o.sslkey, &o.cafile, &o.mca_certificate, &o.mca_key})
        if (exists(*p) && io::descriptor_of(*p) < 0) rules.read_only.push_back(*p);
    const std::string_view secret = o.token_secret.reveal_text();
    if (secret.size() > 1 && secret[0] == '@') {
        const std::string file(secret.substr(1));
        // An HOTP file is rewritten by rename beside it: its directory.
        if (o.token_mode == "hotp") {
            if (exists(parent_of(file))) rules.read_write.push_back(parent_of(file));
        } else if (exists(file) && io::descriptor_of(file) < 0) {
            rules.read_only.push_back(file);
        }
    }
    // The tun's byte counters for the status socket (/sys/class/net/TUN/statistics: tun
    // devices are virtual ones).
    if (exists("/sys/devices/virtual/net")) rules.read_only.emplace_back("/sys/devices/virtual/net");
    // The portal cookie cache, when it is the session user's own (else the broker writes it).
    if (!state_dir.empty() && ::access(state_dir.c_str(), R_OK | W_OK | X_OK) == 0) rules.read_write.push_back(state_dir);
    if (!o.stats_json.empty() && exists(parent_of(o.stats_json))) rules.read_write.push_back(parent_of(o.stats_json));
    // The SAML callback socket's directory and the temporary directory (the IdP form's page).
    if (const std::string dir = parent_of(sso::callback_socket_path(user.uid)); exists(dir)) rules.read_write.push_back(dir);
    const char* tmp = std::getenv("TMPDIR");
    if (const std::string t = tmp && *tmp ? tmp : "/tmp"; exists(t)) rules.read_write.push_back(t);
    // The CSD/HIP wrapper (it handles the server's data) runs under the same rules: its own
    // file read and executed, and /tmp, where openconnect's csd-post.sh makes its files
    // whatever TMPDIR says. Anything else it writes is refused (docs/SECURITY.md).
    // A missing one is reported when it is run, as without Landlock.
    if (exists(o.csd_wrapper)) {
        rules.executable.push_back(o.csd_wrapper);
        if (exists("/tmp")) rules.read_write.emplace_back("/tmp");
    }
    if (const std::string p = sandbox::path_landlock_cannot_follow(rules); !p.empty()) {
        LOG_INFO << "Landlock: not applied: its rules do not hold on the file system of " << p
                 << " (a new inode at every lookup, e.g. a 9p share)";
        return {};
    }
    auto abi = sandbox::restrict_files(rules);
    if (!abi) return abi.error();
    LOG_DEBUG << sandbox::landlock_description(*abi);
    return {};
}

Result<RunAsUser> session_user(const ClientOptions& options) {
    if (!options.setuid_user.empty()) return RunAsUser::lookup(options.setuid_user);
    // The CSD/HIP wrapper handles the server's data and runs in the session process: its user.
    if (!options.csd_user.empty()) {
        auto csd = RunAsUser::lookup(options.csd_user);
        if (!csd) return make_error("--csd-user: " + csd.error().message);
        if (csd->uid != 0) return csd;
    }
    if (auto invoker = sso::invoking_user(); invoker && !invoker->is_root_alone && invoker->uid != 0)
        return RunAsUser{invoker->name, invoker->uid, invoker->gid};
    if (auto system = RunAsUser::lookup("espvpn"); system && system->uid != 0) return system;
    auto nobody = RunAsUser::lookup("nobody");
    if (!nobody) return make_error("no user to run the session as (no -U, no sudo/pkexec invoker, no user espvpn or nobody)");
    LOG_INFO << "the session process runs as nobody (no -U USER, no sudo/pkexec invoker, no system user espvpn)";
    return nobody;
}

Result<std::variant<int, SessionSide>> split_privileges(ClientOptions& options, ProcessControl& process,
                                                        host::BrokerOptions broker_options) {
    if (geteuid() != 0) return std::variant<int, SessionSide>(SessionSide{});
    auto user = session_user(options);
    if (!user) return user.error();
    if (user->uid == 0) return make_error("the session process may not run as root (-U " + user->name + ")");
    // -b: the waiting command forks first; the broker below is its child (the pid file's PID).
    if (options.action == Action::connect && !options.dry_run) process.background();
    broker_options.detach_when_up = options.background && options.action == Action::connect && !options.dry_run;
    const std::string state_dir = broker_options.state_dir;
    std::string token_path;
    std::vector<InputFile> inputs = open_input_files(options, token_path);
    // A SAML login's callback socket, where the session user has no /run/user/UID.
    if (Status s = sso::prepare_callback_dir(user->uid, user->gid); !s)
        LOG_DEBUG << "SSO callback directory: " << s.error().message;

    io::UniqueFd requests_broker, requests_session, events_broker, events_session;
    if (Status s = io::seqpacket_pair(requests_broker, requests_session); !s) return s.error();
    if (Status s = io::seqpacket_pair(events_broker, events_session); !s) return s.error();
    sigset_t old;
    host::block_broker_signals(&old);
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child < 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        return make_error(std::string("fork: ") + std::strerror(errno));
    }
    if (child > 0) {
        // The broker.
        requests_session.reset();
        events_session.reset();
        for (const InputFile& f : inputs) ::close(f.fd);
        // The broker never holds the session's secrets (Secret wipes them as it goes).
        wipe_session_secrets(options);
        process.leave_up_to_session();
        // CAP_NET_ADMIN, and CAP_NET_BIND_SERVICE with CAP_SETPCAP until the domain split's DNS
        // forwarder socket is open (Broker::done_binding drops both); no_new_privs.
        if (Status s = sandbox::keep_only_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE},
                                                       sandbox::KeepSetpcap::yes);
            !s) {
            LOG_ERROR << s.error().message;
            ::kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
            return std::variant<int, SessionSide>(kExitError);
        }
        const host::SessionEnd end = host::run_broker(std::move(requests_broker), std::move(events_broker), child,
                                                      broker_options);
        return std::variant<int, SessionSide>(end.exited ? end.code : kExitError);
    }
    // The session.
    sigprocmask(SIG_SETMASK, &old, nullptr);
    requests_broker.reset();
    events_broker.reset();
    process.forget_pid_file();
    if (Status s = user->drop(); !s) {
        LOG_ERROR << "session process: " << s.error().message;
        _exit(kExitError);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        LOG_ERROR << "session process: prctl: " << std::strerror(errno);
        _exit(kExitError);
    }
    // The user's own browser for a SAML login cannot start under the filter below (a browser
    // that keeps its own sandbox, Chromium's or Firefox's, needs user namespaces): when one may
    // be started, the launcher is forked first, outside the filter (src/sso/browser_launcher.h).
    if (user_browser_may_start(options)) {
        const std::string program = options.external_program.empty() ? "xdg-open" : options.external_program;
        if (Status s = sso::start_browser_launcher(program, [&options] { wipe_session_secrets(options); }); !s)
            LOG_WARN << "no browser launcher (" << s.error().message << "): the single sign-on page will not open by itself";
        else
            LOG_DEBUG << "browser launcher started for " << program;
    }
    // Before any thread: the seccomp allow-list on the whole session (inherited by every
    // thread and program it starts); ESPVPN_SECCOMP=0 turns it off.
    if (Status s = sandbox::confine_session(); !s) {
        LOG_ERROR << "session process: " << s.error().message;
        _exit(kExitError);
    }
    name_unreadable_by_descriptor(inputs, options, token_path);
    use_writable_tmpdir(user->uid);
    if (Status s = restrict_session_files(options, *user, state_dir); !s) {
        LOG_ERROR << "session process: " << s.error().message;
        _exit(kExitError);
    }
    for (const std::string* p : {&options.certificate, &options.sslkey, &options.mca_certificate, &options.mca_key}) {
        if (!is_pkcs11_uri(*p)) continue;
        LOG_INFO << "PKCS#11 tokens are opened by the session process as " << user->name
                 << ": the token's files (e.g. SoftHSM's token directory) must be readable by that user";
        break;
    }
    start_event_thread(std::move(events_session));
    options.setuid_user.clear();  // done: nothing left to drop after the setup
    return std::variant<int, SessionSide>(SessionSide{std::make_shared<host::BrokerChannel>(std::move(requests_session))});
}

}  // namespace espvpn::cli
