import { apiSuite } from "./suite.mjs";

apiSuite("embedded");
