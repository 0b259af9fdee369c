/** The crm-relay release this build is: `--version`, and every backup's manifest. */
export const VERSION = "0.1.0"
