# bash completion for espvpn(8). Installed to bash-completion's completions dir.
# The option list is checked against espvpn's option table by a unit test
# (tests/unit/src/cli/test_option_docs.cpp), so the two cannot drift apart.

_espvpn() {
  local cur prev
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  # options:begin
  local opts="--help -h --version -V --self-check --config --protocol --server
    --background -b --pid-file --setuid -U --stats-json --dry-run
    --verbose -v --quiet -q --timestamp --syslog -l --dump-http-traffic
    --user -u --passwd-on-stdin --non-inter --no-passwd --prompt-fd --authgroup --usergroup -g
    --form-entry -F --cookie -C --cookie-on-stdin --authenticate --cookieonly --printcookie
    --os --csd-wrapper --hip-wrapper --csd-user --gateway-select --useragent --version-string
    --local-hostname --http-timeout --no-http-keepalive --servercert --cafile --no-system-trust
    --resolve --certificate -c --sslkey -k --key-password -p --no-cert-check
    --script -s --interface -i --disable-ipv6 --no-dtls --no-esp --dtls-local-port
    --reconnect-timeout --force-dpd --esp-retry-interval --mtu -m --base-mtu --queue-len -Q --kill-switch --allow-lan
    --proxy -P --proxy-auth --no-proxy --libproxy --pfs --dtls-ciphers --dtls12-ciphers --gnutls-debug
    --cert-expire-warning -e --key-password-from-fsid --no-xmlpost --no-deflate -D --compression --deflate -d
    --passtos --allow-insecure-crypto --http-auth --force-trojan --external-browser --sso-timeout --sso-callback --mca-certificate --mca-key
    --mca-key-password --juniper --no-cookie-cache --no-internal-detection --forget-cookies
    --script-tun -S --token-mode --token-secret --xmlconfig -x --sso-browser
    --status-socket --status-user --status-group --always-on --trusted-domain --trusted-server
    --captive-probe --no-captive-probe --captive-exception-timeout"
  # options:end

  # --name=value: bash splits at '=' when it is in COMP_WORDBREAKS (the default).
  if [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
    prev=${COMP_WORDS[COMP_CWORD-2]}
  elif [[ $cur == = ]]; then
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cur=
  elif [[ $cur == --*=* ]]; then
    prev=${cur%%=*}
    cur=${cur#*=}
  fi
  case $prev in
    --protocol) mapfile -t COMPREPLY < <(compgen -W "gp anyconnect" -- "$cur"); return ;;
    --os) mapfile -t COMPREPLY < <(compgen -W "linux linux-64 win mac-intel android apple-ios" -- "$cur"); return ;;
    --token-mode) mapfile -t COMPREPLY < <(compgen -W "totp hotp" -- "$cur"); return ;;
    --proxy-auth) mapfile -t COMPREPLY < <(compgen -W "ntlm basic ntlm,basic" -- "$cur"); return ;;
    --compression) mapfile -t COMPREPLY < <(compgen -W "none stateless all" -- "$cur"); return ;;
    --gateway-select) mapfile -t COMPREPLY < <(compgen -W "priority latency" -- "$cur"); return ;;
    --usergroup|-g) mapfile -t COMPREPLY < <(compgen -W "portal gateway" -- "$cur"); return ;;
    --setuid|-U|--csd-user) mapfile -t COMPREPLY < <(compgen -u -- "$cur"); return ;;
    --interface|-i) mapfile -t COMPREPLY < <(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur"); return ;;
    --status-user) mapfile -t COMPREPLY < <(compgen -u -- "$cur"); return ;;
    --status-group) mapfile -t COMPREPLY < <(compgen -g -- "$cur"); return ;;
    --config|--pid-file|--stats-json|--status-socket|--cafile|--certificate|-c|--sslkey|-k|--xmlconfig|-x|--mca-certificate|--mca-key)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --script|-s|--csd-wrapper|--hip-wrapper|--sso-browser)
      mapfile -t COMPREPLY < <(compgen -c -- "$cur"); return ;;
    --server|--user|-u|--authgroup|--form-entry|-F|--cookie|-C|--useragent|--version-string|\
    --local-hostname|--http-timeout|--prompt-fd|--servercert|--trusted-domain|--trusted-server|--captive-probe|--captive-exception-timeout|--resolve|--key-password|-p|--dtls-local-port|\
    --reconnect-timeout|--force-dpd|--esp-retry-interval|--mtu|-m|--base-mtu|--queue-len|-Q|--proxy|-P|--token-mode|\
    --dtls-ciphers|--dtls12-ciphers|--gnutls-debug|--cert-expire-warning|-e|--http-auth|--force-trojan|\
    --external-browser|--sso-timeout|--sso-callback|--mca-key-password|--token-secret|--forget-cookies)
      return ;;
  esac
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
  fi
}
complete -F _espvpn espvpn
