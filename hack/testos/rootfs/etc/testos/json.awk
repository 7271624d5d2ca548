# Prints every scalar of a JSON document as PATH=VALUE, one a line, with object keys and
# array indexes joined by dots: storage.files.0.path=/etc/hostname. Enough JSON for the test
# OS to read an Ignition config with busybox alone: \" \\ \/ are unescaped, other escapes
# kept as written, so every value stays on one line. Malformed input ends the output early.
BEGIN { RS = "\001" }
{ s = s $0 }
END { n = length(s); i = 1; value("") }

function ws() { while (i <= n && index(" \t\r\n", substr(s, i, 1))) i++ }

function join(path, k) { return path == "" ? k : path "." k }

function value(path,    c, k, idx, lit) {
	ws()
	if (i > n) return
	c = substr(s, i, 1)
	if (c == "{") {
		i++; ws()
		if (substr(s, i, 1) == "}") { i++; return }
		while (i <= n) {
			ws()
			if (substr(s, i, 1) != "\"") { i = n + 1; return }
			k = str(); ws()
			if (substr(s, i, 1) != ":") { i = n + 1; return }
			i++
			value(join(path, k)); ws()
			c = substr(s, i, 1); i++
			if (c != ",") return
		}
		return
	}
	if (c == "[") {
		i++; ws()
		if (substr(s, i, 1) == "]") { i++; return }
		for (idx = 0; i <= n; idx++) {
			value(join(path, idx)); ws()
			c = substr(s, i, 1); i++
			if (c != ",") return
		}
		return
	}
	if (c == "\"") { print path "=" str(); return }
	lit = ""
	while (i <= n && !index(",]} \t\r\n", substr(s, i, 1))) { lit = lit substr(s, i, 1); i++ }
	if (lit == "") { i = n + 1; return }
	print path "=" lit
}

function str(    out, c) {
	i++
	out = ""
	while (i <= n) {
		c = substr(s, i, 1); i++
		if (c == "\"") return out
		if (c == "\\") {
			c = substr(s, i, 1); i++
			if (c != "\"" && c != "\\" && c != "/") c = "\\" c
		}
		out = out c
	}
	return out
}
