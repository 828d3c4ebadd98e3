# nginx (one worker) serving a small file to ab with 8 connections: the
# worker is on its CPU serving. Truth: ab's requests per second; pidstat.
EXPECT=cpu
EVIDENCE="on CPU"
NEEDS="nginx ab"
start() {
    mkdir -p "$work/nginx/html"; echo hello > "$work/nginx/html/index.html"
    cat > "$work/nginx/nginx.conf" <<N
worker_processes 1; daemon off; pid $work/nginx/pid; error_log /dev/null;
events {}
http { access_log off; server { listen 127.0.0.1:8391; root $work/nginx/html; } }
N
    nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" & NGINX=$!; sleep 0.5
    PID=$(pgrep -n -P $NGINX nginx)
    ab -q -k -c 8 -t 20 -n 10000000 http://127.0.0.1:8391/ > "$work/ab.out" 2>&1 & AB=$!
    CLEANUP="kill $AB $NGINX; wait $NGINX"
}
truth() { default_truth; }
