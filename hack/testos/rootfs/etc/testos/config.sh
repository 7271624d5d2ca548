# First-boot config readers, sourced by /etc/testos/boot. Each prints what it found or
# returns non-zero; none of them trusts the config's bytes beyond the characters it keeps.

ignition_config=/sys/firmware/qemu_fw_cfg/by_name/opt/com.coreos/config/raw
# anvil's QEMU runtime gives an Ignition guest its first-boot metadata here.
fwcfg_metadata=/sys/firmware/qemu_fw_cfg/by_name/opt/anvil/meta-data/raw

# read_ignition copies the Ignition config QEMU passed through fw_cfg to FILE.
read_ignition() {
	[ -r "$ignition_config" ] && cat "$ignition_config" >"$1"
}

# read_fwcfg_metadata copies the first-boot metadata QEMU passed through fw_cfg to FILE.
read_fwcfg_metadata() {
	[ -r "$fwcfg_metadata" ] && cat "$fwcfg_metadata" >"$1"
}

# metadata_lines prints KEY=VALUE for each line of a meta-data FILE as anvil's runtimes
# write it (key: "value", extra keys quoted too; values escaped onto one line), except the
# keys the runtime writes itself.
metadata_lines() {
	sed -n 's/^"\{0,1\}\([A-Za-z0-9._-]*\)"\{0,1\}: "\(.*\)"$/\1=\2/p' "$1" 2>/dev/null |
		grep -v -e '^instance-id=' -e '^local-hostname='
}

# configdrive_meta prints KEY=VALUE for each entry of the "meta" map of the meta_data.json
# of the config drive mounted on DIR (where anvil's metal runtime puts first-boot metadata).
configdrive_meta() {
	awk -f /etc/testos/json.awk "$1/openstack/latest/meta_data.json" 2>/dev/null |
		sed -n 's/^meta\.\([A-Za-z0-9._-]*\)=/\1=/p'
}

# mount_iso mounts the ISO9660 filesystem whose volume label is one of LABELS (a
# space-separated list) on DIR. The label is read from the primary volume descriptor by
# hand: busybox's findfs gives up on devices as small as a seed can be. The disk is probed
# while virtio_blk loads, but a slow machine gets a moment.
mount_iso() {
	local tries=0 dev label
	while [ $tries -lt 10 ]; do
		for dev in /dev/vd[a-z] /dev/sr[0-9]; do
			[ -b "$dev" ] || continue
			[ "$(dd if="$dev" bs=1 skip=32769 count=5 2>/dev/null)" = CD001 ] || continue
			label=$(dd if="$dev" bs=1 skip=32808 count=32 2>/dev/null | tr -d ' ')
			case " $1 " in
			*" $label "*)
				mkdir -p "$2"
				mount -t iso9660 -o ro "$dev" "$2" && return 0
				;;
			esac
		done
		tries=$((tries + 1))
		sleep 0.1
	done
	return 1
}

# read_nocloud mounts a cloud-init NoCloud seed (label cidata) on DIR.
read_nocloud() { mount_iso "cidata CIDATA" "$1"; }

# read_configdrive mounts an OpenStack config drive (label config-2), as Ironic attaches
# one to a deployed server, on DIR.
read_configdrive() { mount_iso "config-2 CONFIG-2" "$1"; }

# configdrive_hostname prints the hostname of the config drive mounted on DIR: its
# meta_data.json's hostname, else user_data's hostname:.
configdrive_hostname() {
	local v
	v=$(grep -o '"hostname"[[:space:]]*:[[:space:]]*"[^"]*"' "$1/openstack/latest/meta_data.json" 2>/dev/null |
		head -n1 | sed 's/.*:[[:space:]]*"//; s/"$//')
	[ -n "$v" ] || v=$(sed -n 's/^hostname:[[:space:]]*//p' "$1/openstack/latest/user_data" 2>/dev/null | head -n1)
	echo "$v"
}

# ignition_hostname prints the contents of the storage.files entry whose path is
# /etc/hostname (a data URL).
ignition_hostname() {
	local flat n
	flat=$(awk -f /etc/testos/json.awk "$1") || return 1
	n=$(echo "$flat" | sed -n 's|^storage\.files\.\([0-9]*\)\.path=/etc/hostname$|\1|p' | head -n1)
	[ -n "$n" ] || return 1
	data_url "$(echo "$flat" | sed -n "s|^storage\.files\.$n\.contents\.source=||p" | head -n1)"
}

# ignition_write_files writes every storage.files entry of the Ignition config FILE whose
# contents are a data URL (what anvil's controllers give a guest), creating its folders.
# /etc/hostname is left to the boot script, which cleans it first.
ignition_write_files() {
	local flat n path
	flat=$(awk -f /etc/testos/json.awk "$1") || return 1
	for n in $(echo "$flat" | sed -n 's|^storage\.files\.\([0-9]*\)\.path=.*|\1|p'); do
		path=$(echo "$flat" | sed -n "s|^storage\.files\.$n\.path=||p" | head -n1)
		case $path in /etc/hostname | "" | *..*) continue ;; /*) ;; *) continue ;; esac
		mkdir -p "${path%/*}"
		data_url "$(echo "$flat" | sed -n "s|^storage\.files\.$n\.contents\.source=||p" | head -n1)" >"$path" ||
			echo "testos: cannot write $path from the Ignition config"
	done
}

# data_url decodes an RFC 2397 data URL: data:[<media type>][;base64],<data>.
data_url() {
	local meta data
	case $1 in data:*,*) ;; *) return 1 ;; esac
	meta=${1#data:}
	meta=${meta%%,*}
	data=${1#*,}
	case $meta in
	*\;base64) echo "$data" | base64 -d ;;
	*) printf '%b' "$(echo "$data" | sed 's/\\/%5C/g; s/%\([0-9A-Fa-f][0-9A-Fa-f]\)/\\x\1/g')" ;;
	esac
}

# nocloud_hostname follows cloud-init: user-data's hostname, else meta-data's local-hostname
# (YAML, or JSON which cloud-init also accepts).
nocloud_hostname() {
	local v
	v=$(sed -n 's/^hostname:[[:space:]]*//p' "$1/user-data" 2>/dev/null | head -n1)
	[ -n "$v" ] || v=$(sed -n 's/^local-hostname:[[:space:]]*//p' "$1/meta-data" 2>/dev/null | head -n1)
	[ -n "$v" ] || v=$(grep -o '"local-hostname"[[:space:]]*:[[:space:]]*"[^"]*"' "$1/meta-data" 2>/dev/null |
		head -n1 | sed 's/.*:[[:space:]]*//')
	echo "$v" | sed 's/[[:space:]]#.*//; s/^["'\'']//; s/["'\''][[:space:]]*$//'
}

# clean_hostname keeps a hostname's first line and only the characters a hostname may have.
clean_hostname() {
	echo "$1" | head -n1 | tr -cd 'A-Za-z0-9.-' | cut -c1-63
}

# config_marker prints what follows the first anvil-marker= in FILE.
config_marker() {
	grep -a -o 'anvil-marker=[A-Za-z0-9._-]*' "$1" | head -n1 | cut -d= -f2
}
